import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Agent, request } from "node:http"
import { AppConfig } from "../src/Config.js"
import { exitWithin, freePort, readyzAnswers, serviceEnvironment, startService } from "./support/processes.js"
import { signedInUser, TestApp } from "./support/TestApp.js"
import { holdWalletLock, newKey, putBudget } from "./support/Wallets.js"

/**
 * Clients that hang up mid-request beside clients that read steadily (issue 22.5): a request
 * interrupted by its client's hang-up must never fail another one (a statement cancel that lands
 * on the next user of the connection, 57014), and the process still stops within 10 s.
 */

const STORM = 8_000
const READERS = 6
const ABORTERS = 6

/** One GET on a kept-alive connection, to the end: its status (0 when the connection failed). */
const get = (agent: Agent, port: number, path: string, token: string) =>
  new Promise<number>((resolve) => {
    const req = request(
      { host: "127.0.0.1", port, path, agent, headers: { authorization: `Bearer ${token}` } },
      (response) => {
        response.resume()
        response.on("end", () => resolve(response.statusCode ?? 0))
        response.on("error", () => resolve(0))
      }
    )
    req.on("error", () => resolve(0))
    req.end()
  })

/** A GET its client gives up on 0–15 ms after sending it: the connection is destroyed. */
const hangUp = (port: number, path: string, token: string) =>
  new Promise<void>((resolve) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, headers: { authorization: `Bearer ${token}` } })
    req.on("error", () => resolve())
    req.on("close", () => resolve())
    req.end()
    setTimeout(() => req.destroy(), Math.floor(Math.random() * 16))
  })

layer(TestApp(), { excludeTestServices: true, timeout: "60 seconds" })("hang-ups (issue 22.5)", (it) => {
  describe("statements of an interrupted request", () => {
    it.effect("run to their end: the interruption waits, no cancel is sent that could land on another statement", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE IF NOT EXISTS hang_up_marks (mark text NOT NULL)`
        // Interrupted 100 ms into its 400 ms: a cancelled statement writes nothing.
        yield* sql`
          WITH slept AS (SELECT pg_sleep(0.4))
          INSERT INTO hang_up_marks (mark) SELECT 'ran to its end' FROM slept`.pipe(
          Effect.timeout("100 millis"),
          Effect.ignore
        )
        const marks = yield* sql<{ readonly mark: string }>`SELECT mark FROM hang_up_marks`
        expect(marks.map((row) => row.mark)).toEqual(["ran to its end"])
      }).pipe(Effect.orDie))

    it.effect("a statement cancelled from outside (57014) is 503 unavailable with Retry-After, not 500", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        expect((yield* putBudget(user.token, { budget_usd: "5", idempotency_key: newKey() })).status).toBe(200)
        const holder = yield* holdWalletLock(user.id, 1_500)
        const sql = yield* SqlClient.SqlClient
        const write = yield* Effect.fork(
          putBudget(user.token, { budget_usd: "6", expected_version: 1, idempotency_key: newKey() })
        )
        yield* Effect.sleep("300 millis")
        yield* sql`
          SELECT pg_cancel_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`.pipe(
          Effect.orDie
        )
        const reply = yield* Fiber.join(write)
        yield* Fiber.interrupt(holder)
        expect(reply.status).toBe(503)
        expect(reply.body).toMatchObject({ code: "unavailable" })
        expect(reply.headers["retry-after"]).toMatch(/^\d+$/)
      }))
  })

  describe("a client that hangs up beside steady readers", () => {
    it.effect(
      "no steady read answers 5xx, and the API exits within 10 s of SIGTERM after the storm",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const steady = yield* signedInUser()
          const rude = yield* signedInUser()
          for (const user of [steady, rude]) {
            expect((yield* putBudget(user.token, { budget_usd: "50", idempotency_key: newKey() })).status).toBe(200)
          }
          const port = yield* freePort
          const api = yield* startService(
            "api",
            serviceEnvironment(config, `${config.redisPrefix}:hangups`, { PORT: String(port) })
          )
          yield* readyzAnswers(port, api)
          const statuses = yield* Effect.promise(async () => {
            const agent = new Agent({ keepAlive: true, maxSockets: READERS })
            const found = new Map<number, number>()
            const until = Date.now() + STORM
            const paths = ["/developer/account/wallet", "/developer/account/wallet/ledger?limit=50"]
            const reader = async () => {
              for (let i = 0; Date.now() < until; i++) {
                const status = await get(agent, port, paths[i % 2] ?? "", steady.token)
                found.set(status, (found.get(status) ?? 0) + 1)
              }
            }
            const aborter = async () => {
              for (let i = 0; Date.now() < until; i++) await hangUp(port, paths[i % 2] ?? "", rude.token)
            }
            await Promise.all([
              ...Array.from({ length: READERS }, reader),
              ...Array.from({ length: ABORTERS }, aborter)
            ])
            agent.destroy()
            return found
          })
          const total = [...statuses.values()].reduce((a, b) => a + b, 0)
          const failed = [...statuses].filter(([status]) => status === 0 || status >= 500)
          console.log(`hang-up storm: ${total} steady reads, statuses ${JSON.stringify([...statuses])}`)
          expect(total).toBeGreaterThan(100)
          expect(failed).toEqual([])
          api.signal("SIGTERM")
          expect(yield* exitWithin(api, "10 seconds")).toEqual({ code: 0, signal: null })
        }).pipe(Effect.scoped),
      90_000
    )
  })
})
