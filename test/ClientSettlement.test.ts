import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option, Redacted, Runtime } from "effect"
import { randomUUID } from "node:crypto"
import {
  SessionCapReached,
  SessionRefused,
  SettlementClient,
  SettlementEnqueueError,
  type SettlementResult
} from "../packages/client/src/settlement.js"
import { AppConfig } from "../src/Config.js"
import { jobIdOf } from "../src/Settlement/Jobs.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { createRepository } from "./support/policies.js"
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
        // What fits (D19): the wallet's 1 available, on the error as in its result.
        expect(refused).toMatchObject({
          status: "insufficient_funds",
          max_reservable_usd: "1.000000",
          limit: undefined
        })
        expect((refused as SessionRefused).result.max_reservable_usd).toBe("1.000000")
        const late = yield* Effect.promise(() =>
          client.extend({ account_id: account.id, session_id, idempotency_key: `${session_id}-late` })
        )
        expect(late.status).toBe("session_closed")
      }))

    it.scoped("a reserve past the session's cap runs no work: SessionRefused carries limit_reached and the limit (D16)", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const account = yield* newAccount("100")
        const session_id = `s-${randomUUID()}`
        let ran = false
        const refused = yield* rejection(
          client.runSession({ account_id: account.id, session_id, amount_usd: "5", max_usd: "4" }, async () => {
            ran = true
          })
        )
        expect(ran).toBe(false)
        expect(refused).toBeInstanceOf(SessionRefused)
        expect((refused as SessionRefused).result).toMatchObject({
          status: "limit_reached",
          limit: { id: null, scope: "session", amount_usd: "4.000000", used_usd: "0.000000" },
          max_reservable_usd: "4.000000"
        })
        // The error carries the limit and what would have fit (D19) itself, and says them.
        expect(refused).toMatchObject({
          status: "limit_reached",
          limit: (refused as SessionRefused).result.limit,
          max_reservable_usd: "4.000000"
        })
        expect((refused as SessionRefused).message).toBe(
          "the session's reserve was answered limit_reached by the session session limit " +
            "(at most 4.000000 could be reserved); the work did not run"
        )
      }))

    it.scoped("labels or a model that break their rules are refused before anything is sent: no work, no release (D19)", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const queue = yield* SettlementQueue
        const account = yield* newAccount("10")
        const cases = [
          { labels: { "Team": "search" }, problem: `labels key "Team" must be 1 to 40 characters` },
          { labels: { team: "" }, problem: "labels.team must be 1 to 100 characters" },
          { labels: { team: "a\tb" }, problem: "labels.team must not contain control characters" },
          {
            labels: Object.fromEntries(Array.from({ length: 11 }, (_, n) => [`k${n}`, "v"])),
            problem: "labels must have at most 10 keys, not 11"
          }
        ]
        for (const { labels, problem } of cases) {
          const session_id = `s-${randomUUID()}`
          let ran = false
          const started = Date.now()
          const refused = yield* rejection(
            client.runSession({ account_id: account.id, session_id, amount_usd: "1", labels }, async () => {
              ran = true
            })
          )
          expect(refused).toBeInstanceOf(SettlementEnqueueError)
          expect((refused as SettlementEnqueueError).message).toContain(problem)
          expect(ran).toBe(false)
          // At once: no release was sent to wait for a session the worker never heard of.
          expect(Date.now() - started).toBeLessThan(5_000)
          for (const suffix of ["reserve", "release"]) {
            expect(yield* Effect.promise(() => queue.getJob(jobIdOf(account.id, `${session_id}-${suffix}`))))
              .toBeUndefined()
          }
        }

        // A model that breaks its rule refuses that spend, before it is sent; the session goes on.
        const session_id = `s-${randomUUID()}`
        const answer = yield* Effect.promise(() =>
          client.runSession({ account_id: account.id, session_id, amount_usd: "1" }, async (session) => {
            const bad = await session.spend("0.5", { model: "x".repeat(101) }).then(() => "sent", (error) => error)
            return { bad, good: await session.spend("0.5", { model: "model-a" }) }
          })
        )
        expect(answer.bad).toBeInstanceOf(SettlementEnqueueError)
        expect((answer.bad as SettlementEnqueueError).message).toContain("model must be 1 to 100 characters")
        expect(yield* Effect.promise(() => queue.getJob(jobIdOf(account.id, `${session_id}-spend-1`))))
          .toBeUndefined()
        expect(answer.good.status).toBe("applied")
      }))

    it.scoped("a session's labels reach its row and entries, a spend's model its entry (D19)", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const account = yield* newAccount("10")
        const session_id = `s-${randomUUID()}`
        const labels = { team: "search", "env.stage": "ci-2" }
        yield* Effect.promise(() =>
          client.runSession({ account_id: account.id, session_id, amount_usd: "2", labels }, async (session) => {
            await session.spend("0.5", { model: "model-a" })
            await session.spend("0.25")
          })
        )
        const sql = yield* SqlClient.SqlClient
        const sessions = yield* sql<{ labels: unknown }>`
          SELECT s.labels FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
          WHERE w.account_id = ${account.id} AND s.session_id = ${session_id}`.pipe(Effect.orDie)
        expect(sessions).toEqual([{ labels }])
        const entries = yield* sql<{ kind: string; amount_usd: string; model: string | null; labels: unknown }>`
          SELECT e.kind::text AS kind, e.amount_usd::text AS amount_usd, e.model, e.labels
          FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
          WHERE w.account_id = ${account.id} AND e.session_id = ${session_id} AND e.kind::text = 'spend'
          ORDER BY e.sequence`.pipe(Effect.orDie)
        expect(entries).toEqual([
          { kind: "spend", amount_usd: "0.500000", model: "model-a", labels },
          { kind: "spend", amount_usd: "0.250000", model: null, labels }
        ])
      }))

    it.scoped("a spend that reaches the cap aborts the session's signal; the work stops, the hold is released (D16)", () =>
      Effect.gen(function*() {
        const client = yield* connect
        const account = yield* newAccount("100")
        const repository = yield* createRepository(account.id)
        const session_id = `s-${randomUUID()}`
        const results: Array<SettlementResult> = []
        const reason = yield* Effect.promise(() =>
          client.runSession(
            {
              account_id: account.id,
              session_id,
              amount_usd: "3",
              max_usd: "3",
              repository_id: repository,
              user_id: account.id
            },
            async (session) => {
              // An agent's loop: spend per step until the session says stop.
              while (!session.signal.aborted && results.length < 10) results.push(await session.spend("1"))
              return session.signal.reason as unknown
            }
          )
        )
        expect(results.map((result) => result.cap_reached ?? false)).toEqual([false, false, true])
        expect(reason).toBeInstanceOf(SessionCapReached)
        expect((reason as SessionCapReached).result).toEqual(results[2])
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ state: string; repository_id: string; user_id: string; max_usd: string }>`
          SELECT s.state::text AS state, s.repository_id::text AS repository_id, s.user_id::text AS user_id,
                 s.max_usd::text AS max_usd
          FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
          WHERE w.account_id = ${account.id} AND s.session_id = ${session_id}`.pipe(Effect.orDie)
        expect(rows).toEqual([{
          state: "released",
          repository_id: repository,
          user_id: account.id,
          max_usd: "3.000000"
        }])
      }))
  })
})
