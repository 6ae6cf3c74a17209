import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { createServer, type Server } from "node:http"
import { AppConfig } from "../src/Config.js"
import { type Child, exitWithin, freePort, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, postCredit } from "./support/Wallets.js"
import { receiver, verify } from "./support/webhookReceiver.js"

/**
 * The relay and the delivery worker run in the webhooks processes (D17): one killed with SIGKILL
 * while it relays and delivers loses nothing. The API here is the test's own; only the webhooks
 * processes relay and deliver.
 */

const SETTINGS = { WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_RETRY_SCALE: "0.0005", WEBHOOK_RELAY_SWEEP_MS: "300" }

const TestLayer = Layer.mergeAll(TestApp(SETTINGS))

const started = (webhooks: Child) =>
  waitFor(
    "the webhooks process delivers",
    Effect.sync(() =>
      webhooks.output().includes("webhook delivery worker started") ? Option.some(true) : Option.none()
    ),
    { limit: "30 seconds", alive: [webhooks] }
  )

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })(
  "webhooks through crashes of their processes (D17)",
  (it) => {
    it.scoped("SIGKILL of a webhooks process mid-relay loses no delivery; duplicates only under the same webhook-id", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const environment = serviceEnvironment(config, config.redisPrefix, { ...SETTINGS, LOG_LEVEL: "info" })
        const server = yield* receiver
        const admins = yield* Effect.all([1, 2, 3].map(() => signedInUser({ admin: true })))
        const secrets = new Map<string, string>()
        for (const [n, admin] of admins.entries()) {
          const reply = yield* call("POST", "/developer/account/webhooks", {
            token: admin.token,
            body: { url: server.url(`/account-${n}`) }
          })
          expect(reply.status).toBe(201)
          secrets.set(`/account-${n}`, (reply.body as { secret: string }).secret)
        }
        const first = yield* startService("webhooks", environment)
        yield* started(first)

        const credits = (rounds: number) =>
          Effect.all(
            admins.flatMap((admin) =>
              Array.from({ length: rounds }, () =>
                Effect.map(postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() }), (reply) => {
                  expect(reply.status).toBe(200)
                }))
            ),
            { concurrency: 6 }
          )
        yield* credits(10)
        // Killed while it relays and delivers what was just written.
        first.kill()
        yield* credits(10)
        const metricsPort = yield* freePort
        const [second, third] = yield* Effect.all([
          startService("webhooks", environment),
          startService("webhooks", { ...environment, WEBHOOK_WORKER_METRICS_PORT: String(metricsPort) })
        ])
        yield* Effect.all([started(second), started(third)])
        yield* credits(5)
        // And one of the two as well, mid-flight.
        second.kill()
        yield* credits(5)

        const expected = new Set<string>()
        for (const [n, admin] of admins.entries()) {
          const page = yield* call("GET", "/developer/account/events?limit=500", { token: admin.token })
          for (const event of (page.body as { events: ReadonlyArray<{ id: string }> }).events) {
            expected.add(`/account-${n} ${event.id}`)
          }
        }
        expect(expected.size).toBe(3 * 30)
        const got = () => new Set(server.received.map((r) => `${r.path} ${r.headers["webhook-id"]}`))
        yield* waitFor(
          "every event reached its account's endpoint",
          Effect.sync(() => [...expected].every((pair) => got().has(pair)) ? Option.some(true) : Option.none()),
          { limit: "60 seconds", alive: [third] }
        )
        // Nothing else: no event of one account at another's endpoint, nothing unknown.
        expect([...got()].sort()).toEqual([...expected].sort())
        for (const delivery of server.received) {
          expect(verify(secrets.get(delivery.path) ?? "", delivery)).toMatchObject({ type: "wallet.credit_added" })
        }
      }))

    it.scoped("SIGTERM with deliveries in flight: draining with them, each answered and recorded, stopped, exit 0", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const environment = serviceEnvironment(config, `${config.redisPrefix}:draining`, {
          ...SETTINGS,
          LOG_LEVEL: "info"
        })
        const slow = yield* slowReceiver(1_500)
        const admin = yield* signedInUser({ admin: true })
        const made = yield* call("POST", "/developer/account/webhooks", {
          token: admin.token,
          body: { url: slow.url }
        })
        expect(made.status).toBe(201)
        const endpointId = (made.body as { id: string }).id
        const webhooks = yield* startService("webhooks", environment)
        yield* started(webhooks)
        yield* Effect.all(
          Array.from(
            { length: 6 },
            () =>
              Effect.map(postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() }), (reply) => {
                expect(reply.status).toBe(200)
              })
          ),
          { concurrency: 6 }
        )
        yield* waitFor(
          "deliveries are in flight",
          Effect.sync(() => slow.received() > 0 ? Option.some(true) : Option.none()),
          { limit: "30 seconds", alive: [webhooks] }
        )
        webhooks.signal("SIGTERM")
        expect(yield* exitWithin(webhooks, "15 seconds")).toEqual({ code: 0, signal: null })
        const lines = webhooks.output().split("\n").filter((line) => line.trim().startsWith("{")).map((line) =>
          JSON.parse(line) as Record<string, unknown>
        )
        const draining = lines.filter((line) => line.msg === "draining")
        expect(draining, webhooks.output()).toHaveLength(1)
        expect(draining[0]).toMatchObject({ level: "info", service: "webhooks" })
        expect(Number(draining[0]?.deliveries_in_flight)).toBeGreaterThan(0)
        expect(lines.at(-1), webhooks.output()).toMatchObject({ level: "info", msg: "stopped", service: "webhooks" })
        // What it had sent, it waited for, answered all, and recorded before it exited.
        expect(slow.answered()).toBe(slow.received())
        const reply = yield* call("GET", `/developer/account/webhooks/${endpointId}/deliveries`, { token: admin.token })
        const attempts = (reply.body as { deliveries: ReadonlyArray<{ outcome: string }> }).deliveries
        expect(attempts.filter((attempt) => attempt.outcome === "delivered")).toHaveLength(slow.received())
      }))
  }
)

/** A receiver that answers 204 after `delayMs`: its deliveries stay in flight that long. */
const slowReceiver = (delayMs: number) =>
  Effect.acquireRelease(
    Effect.async<{
      readonly url: string
      readonly received: () => number
      readonly answered: () => number
      readonly server: Server
    }>((resume) => {
      let received = 0
      let answered = 0
      const server = createServer((request, response) => {
        received += 1
        request.resume()
        setTimeout(() => {
          response.writeHead(204).end(() => {
            answered += 1
          })
        }, delayMs)
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({
          url: `http://127.0.0.1:${port}/slow`,
          received: () => received,
          answered: () => answered,
          server
        }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  )
