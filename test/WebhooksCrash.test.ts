import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "../src/Config.js"
import { type Child, freePort, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, postCredit } from "./support/Wallets.js"
import { receiver, verify } from "./support/webhookReceiver.js"

/**
 * The relay and the delivery worker run in the worker processes (D17): a worker killed with
 * SIGKILL while it relays and delivers loses nothing. The API here is the test's own; only the
 * worker processes relay and deliver.
 */

const SETTINGS = { WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_RETRY_SCALE: "0.0005", WEBHOOK_RELAY_SWEEP_MS: "300" }

const TestLayer = Layer.mergeAll(TestApp(SETTINGS))

const started = (worker: Child) =>
  waitFor(
    "the worker delivers webhooks",
    Effect.sync(() => worker.output().includes("webhook delivery worker started") ? Option.some(true) : Option.none()),
    { limit: "30 seconds", alive: [worker] }
  )

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })(
  "webhooks through worker crashes (D17)",
  (it) => {
    it.scoped("SIGKILL of a worker mid-relay loses no delivery; duplicates only under the same webhook-id", () =>
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
        const first = yield* startService("worker", environment)
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
          startService("worker", environment),
          startService("worker", { ...environment, WORKER_METRICS_PORT: String(metricsPort) })
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
  }
)
