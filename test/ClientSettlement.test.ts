import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option, Redacted, Runtime } from "effect"
import { randomUUID } from "node:crypto"
import {
  SessionRefused,
  SettlementClient,
  SettlementEnqueueError,
  type SettlementResult
} from "../packages/client/src/index.js"
import { AppConfig } from "../src/Config.js"
import { jobIdOf } from "../src/Settlement/Jobs.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { waitFor } from "./support/processes.js"
import { rejection } from "./support/rejection.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * The client package's settlement side (D8, D12) against the worker: the promise producer and
 * `runSession`, whose release must follow every outcome of the work.
 */

/** The client on this file's Redis and queue prefix, closed with the scope. */
const connect = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* Effect.acquireRelease(
    Effect.promise(() =>
      SettlementClient.connect({ redisUrl: Redacted.value(config.redisUrl), prefix: config.settlementQueuePrefix })
    ),
    (client) => Effect.promise(() => client.close())
  )
})

layer(TestSettlement(), { excludeTestServices: true, timeout: "60 seconds" })("the client's settlement", (it) => {
  describe("reserve, spend, release, extend", () => {
    it.scoped("each answers the worker's typed result; an invalid payload is refused before it is sent", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const account = yield* newAccount("10")
        const session_id = `s-${randomUUID()}`
        const base = { account_id: account.id, session_id }
        const reserved = yield* Effect.promise(() =>
          client.reserve({ ...base, amount_usd: "4", idempotency_key: `${session_id}-r` })
        )
        expect(reserved).toMatchObject({ status: "applied", wallet: { reserved_usd: "4.000000" } })
        const extended = yield* Effect.promise(() =>
          client.extend({ ...base, idempotency_key: `${session_id}-e`, ttl_seconds: 600 })
        )
        expect(extended.status).toBe("applied")
        expect(typeof extended.expires_at).toBe("string")
        const spent = yield* Effect.promise(() =>
          client.spend({ ...base, amount_usd: "1", idempotency_key: `${session_id}-s` })
        )
        expect(spent).toMatchObject({ status: "applied", wallet: { spent_usd: "1.000000" } })
        const again = yield* Effect.promise(() =>
          client.spend({ ...base, amount_usd: "1", idempotency_key: `${session_id}-s` })
        )
        // The same job again: BullMQ still holds it under its id, so the answer is the first one's, booked once.
        expect(again).toEqual(spent)
        const released = yield* Effect.promise(() => client.release({ ...base, idempotency_key: `${session_id}-x` }))
        expect(released).toMatchObject({
          status: "applied",
          wallet: { reserved_usd: "0.000000", spent_usd: "1.000000" }
        })

        const invalid = yield* rejection(
          client.reserve({ ...base, amount_usd: "-1", idempotency_key: `${session_id}-bad` })
        )
        expect(invalid).toBeInstanceOf(SettlementEnqueueError)
      }))
  })

  describe("runSession", () => {
    it.scoped("reserves, extends the hold while the work runs, releases afterwards and answers the work's value", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const queue = yield* SettlementQueue
        const account = yield* newAccount("10")
        const session_id = `s-${randomUUID()}`
        // The work lasts until the first heartbeat has been applied.
        const heartbeat = (n: number) =>
          Effect.promise(() => queue.getJob(jobIdOf(account.id, `${session_id}-extend-${n}`))).pipe(
            // Read whole each time: a job read before it finished carries no result.
            Effect.map((job) =>
              job !== undefined && job.finishedOn !== undefined && job.returnvalue !== null
                ? Option.some(job.returnvalue as SettlementResult)
                : Option.none()
            )
          )
        const runtime = yield* Effect.runtime<never>()
        const answer = yield* Effect.promise(() =>
          client.runSession(
            { account_id: account.id, session_id, amount_usd: "3", heartbeatMs: 200 },
            async (session) => {
              const spent = await session.spend("1.5")
              const first = await Runtime.runPromise(runtime)(
                waitFor("a heartbeat is applied", heartbeat(1), { limit: "20 seconds" })
              )
              return { reserved: session.reserved.status, spent: spent.status, heartbeat: first.status }
            }
          )
        )
        expect(answer).toEqual({ reserved: "applied", spent: "applied", heartbeat: "applied" })
        // Released: the session is closed, so a heartbeat now answers session_closed.
        const late = yield* Effect.promise(() =>
          client.extend({ account_id: account.id, session_id, idempotency_key: `${session_id}-late` })
        )
        expect(late.status).toBe("session_closed")
        expect(late.wallet).toMatchObject({ reserved_usd: "0.000000", spent_usd: "1.500000" })
      }))

    it.scoped("releases when the work throws, and rethrows the work's error", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const account = yield* newAccount("10")
        const session_id = `s-${randomUUID()}`
        const failure = new Error("the work failed")
        const thrown = yield* rejection(
          client.runSession({ account_id: account.id, session_id, amount_usd: "2" }, async () => {
            throw failure
          })
        )
        expect(thrown).toBe(failure)
        const late = yield* Effect.promise(() =>
          client.extend({ account_id: account.id, session_id, idempotency_key: `${session_id}-late` })
        )
        expect(late).toMatchObject({ status: "session_closed", wallet: { reserved_usd: "0.000000" } })
      }))

    it.scoped("a refused reserve runs no work, closes the session and says why", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const account = yield* newAccount("1")
        const session_id = `s-${randomUUID()}`
        let ran = false
        const refused = yield* rejection(
          client.runSession({ account_id: account.id, session_id, amount_usd: "5" }, async () => {
            ran = true
          })
        )
        expect(ran).toBe(false)
        expect(refused).toBeInstanceOf(SessionRefused)
        expect((refused as SessionRefused).result.status).toBe("insufficient_funds")
        const late = yield* Effect.promise(() =>
          client.extend({ account_id: account.id, session_id, idempotency_key: `${session_id}-late` })
        )
        expect(late.status).toBe("session_closed")
      }))
  })
})
