import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import type { Job, Queue } from "bullmq"
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import { Settlement } from "../src/Settlement.js"
import { settlementQueue, waitFor } from "./support/processes.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * One job never harms another (D8), as a runner meets it: plain BullMQ jobs,
 * innocent and poisonous, enqueued together with few attempts, taken by the
 * real worker, which batches them into shared transactions.
 */

const ATTEMPTS = { attempts: 3, backoff: { type: "fixed", delay: 50 } } as const

const reserveJob = (account: Account, session_id: string, amount_usd: string, idempotency_key = randomUUID()) => ({
  name: "reserve",
  data: { account_id: account.id, session_id, amount_usd, idempotency_key },
  opts: ATTEMPTS
})

const finished = (queue: Queue, jobs: ReadonlyArray<Job>) =>
  Effect.promise(async () => {
    const states = await Promise.all(jobs.map((job) => queue.getJobState(job.id ?? "")))
    if (!states.every((state) => state === "completed" || state === "failed")) return Option.none()
    return Option.some(await Promise.all(jobs.map(async (job) => (await queue.getJob(job.id ?? "")) ?? job)))
  })

layer(TestSettlement(), { excludeTestServices: true })("one job never harms another (D8)", (it) => {
  describe("poison in a bulk of innocent jobs", () => {
    it.scoped("60 innocent reserves over three wallets all apply once; each poison job fails at once, alone", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const settlement = yield* Settlement
        const sql = yield* SqlClient.SqlClient
        const queue = yield* settlementQueue(config, config.settlementQueuePrefix)
        const wallets = [yield* newAccount("1000"), yield* newAccount("1000"), yield* newAccount()]
        const [first, second, unenforced] = wallets
        if (first === undefined || second === undefined || unenforced === undefined) throw new Error("no accounts")
        // The unenforced wallet already holds nearly what a column can: one more large reserve cannot be booked.
        yield* settlement.apply({
          kind: "reserve",
          payload: {
            account_id: unenforced.id,
            session_id: "big",
            amount_usd: "999999999000",
            idempotency_key: randomUUID()
          }
        })

        const innocent = Array.from({ length: 60 }, (_, n) => reserveJob(wallets[n % 3] ?? first, `session-${n}`, "1"))
        const poison = [
          reserveJob(first, "nul\u0000session", "1"),
          reserveJob(second, "lone\uD800surrogate", "1"),
          reserveJob(unenforced, "overflow", "999999999999")
        ]
        // Poison in the middle of the bulk, so it shares batches with innocent jobs of every wallet.
        const bulk = [...innocent.slice(0, 30), ...poison, ...innocent.slice(30)]
        const added = yield* Effect.promise(() => queue.addBulk(bulk))
        const done = yield* waitFor("every job has finished", finished(queue, added), { limit: "60 seconds" })

        const byKey = new Map(done.map((job) => [String(job.data.idempotency_key), job]))
        for (const job of innocent) {
          const result = byKey.get(job.data.idempotency_key)
          expect(result?.returnvalue, job.data.session_id).toMatchObject({ status: "applied" })
        }
        const reasons = poison.map((job) => {
          const result = byKey.get(job.data.idempotency_key)
          expect(result?.failedReason, job.data.session_id).toBeDefined()
          // Failed at once: BullMQ did not try it again.
          expect(result?.attemptsMade, job.data.session_id).toBe(1)
          return result?.failedReason ?? ""
        })
        expect(reasons[0]).toContain("NUL")
        expect(reasons[1]).toContain("lone surrogates")
        expect(reasons[2]).toContain("reserved above")

        // The books: each innocent key once, nothing of the poison.
        const entries = yield* sql<{ session_id: string; count: string }>`
          SELECT session_id, count(*)::text AS count FROM ledger_entries
          WHERE kind = 'reserve' AND session_id LIKE 'session-%' GROUP BY session_id`
        expect(entries).toHaveLength(60)
        expect(entries.every((row) => row.count === "1")).toBe(true)
        const poisoned =
          yield* sql`SELECT 1 FROM ledger_entries WHERE session_id IN ('overflow') OR session_id LIKE 'lone%'`
        expect(poisoned).toEqual([])
      }))
  })

  describe("a key belongs to one job (D8)", () => {
    it.scoped("a spend under a reserve's key fails at once as idempotency_key_reused; the same reserve again is a duplicate", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const sql = yield* SqlClient.SqlClient
        const queue = yield* settlementQueue(config, config.settlementQueuePrefix)
        const account = yield* newAccount("100")
        const key = randomUUID()
        const reserve = { account_id: account.id, session_id: "s-1", amount_usd: "5", idempotency_key: key }
        const [first] = yield* Effect.promise(() => queue.addBulk([{ name: "reserve", data: reserve, opts: ATTEMPTS }]))
        if (first === undefined) throw new Error("not enqueued")
        yield* waitFor("the reserve has finished", finished(queue, [first]), { limit: "30 seconds" })

        const later = yield* Effect.promise(() =>
          queue.addBulk([
            {
              name: "spend",
              data: { account_id: account.id, session_id: "s-1", amount_usd: "5", idempotency_key: key },
              opts: ATTEMPTS
            },
            { name: "reserve", data: { ...reserve, amount_usd: "5.000000" }, opts: ATTEMPTS },
            { name: "reserve", data: { ...reserve, amount_usd: "6" }, opts: ATTEMPTS }
          ])
        )
        const [spend, repeat, otherAmount] = yield* waitFor("the later jobs have finished", finished(queue, later), {
          limit: "30 seconds"
        })
        expect(spend?.failedReason).toContain("idempotency_key_reused")
        expect(spend?.attemptsMade).toBe(1)
        expect(repeat?.returnvalue).toMatchObject({ status: "duplicate", first_status: "applied" })
        expect(otherAmount?.failedReason).toContain("idempotency_key_reused")
        const spent = yield* sql`SELECT 1 FROM ledger_entries WHERE kind = 'spend' AND session_id = 's-1'`
        expect(spent).toEqual([])
      }))
  })
})
