import { expect, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Scope } from "effect"
import { DELIVERY_TIMEOUT_MS } from "../src/Domain/Webhooks.js"
import { DeliveriesInFlight } from "../src/Webhooks/InFlight.js"
import { TestConfig } from "./support/TestApp.js"

/** The places of deliveries in flight against the real Redis (D17), as the delivery worker takes them. */
const TestLayer = DeliveriesInFlight.Default.pipe(Layer.provideMerge(TestConfig()))

layer(TestLayer, { excludeTestServices: true })("deliveries in flight (D17)", (it) => {
  it.effect(
    "an endpoint's fifth delivery finds no place; places a dead worker held free themselves",
    () =>
      Effect.gen(function*() {
        const inFlight = yield* DeliveriesInFlight
        const place = (job: string) => ({ job, endpoint: "endpoint-a", account: "user:lease", parked: 0 })
        // A worker that dies: its scope never closes, so its places are never given back.
        const dead = yield* Scope.make()
        for (const job of ["j1", "j2", "j3", "j4"]) {
          expect(Option.isSome(yield* Scope.extend(inFlight.hold(place(job)), dead))).toBe(true)
        }
        expect(Option.isSome(yield* Effect.scoped(inFlight.hold(place("j5"))))).toBe(false)
        // Another endpoint of the account still has room (the account's bound is 10).
        expect(Option.isSome(yield* Effect.scoped(inFlight.hold({ ...place("j6"), endpoint: "endpoint-b" })))).toBe(
          true
        )
        // The leases outlive a delivery's 10 s answer, then lapse.
        yield* Effect.sleep(`${DELIVERY_TIMEOUT_MS + 6_000} millis`)
        expect(Option.isSome(yield* Effect.scoped(inFlight.hold(place("j7"))))).toBe(true)
        yield* Scope.close(dead, Exit.void)
      }),
    60_000
  )

  it.effect("a place given back goes to the next delivery", () =>
    Effect.gen(function*() {
      const inFlight = yield* DeliveriesInFlight
      const place = (job: string) => ({ job, endpoint: "endpoint-c", account: "user:give", parked: 0 })
      const scopes = yield* Effect.forEach(["k1", "k2", "k3", "k4"], (job) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          expect(Option.isSome(yield* Scope.extend(inFlight.hold(place(job)), scope))).toBe(true)
          return scope
        }))
      expect(Option.isSome(yield* Effect.scoped(inFlight.hold(place("k5"))))).toBe(false)
      const [first] = scopes
      if (first !== undefined) yield* Scope.close(first, Exit.void)
      expect(Option.isSome(yield* Effect.scoped(inFlight.hold(place("k6"))))).toBe(true)
      yield* Effect.forEach(scopes, (scope) => Scope.close(scope, Exit.void))
    }))
})
