import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import type { Job, Queue } from "bullmq"
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { Books } from "../src/Books.js"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import { type Child, serviceEnvironment, settlementQueue, startService, waitFor } from "./support/processes.js"
import { allFinished, workerCount } from "./support/settlementLoad.js"
import { saveLimits } from "./support/spendControls.js"
import { ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * Fleet controls (docs/decisions/D19-fleet-controls.md) as runners meet them: two worker
 * processes as `npm start` runs them, jobs enqueued with plain BullMQ and its defaults, the
 * limits saved as the PUT leaves them. What is proven is what LLM gateways' users complain of:
 * a fan-out past a concurrency limit, the first sessions of a repository overshooting its new
 * limit, a warning sent by every request or by none, a raise that never ends.
 */

type Data = Record<string, unknown>
interface Result {
  readonly status: string
  readonly max_reservable_usd?: string
  readonly limit?: Data
}

/** Every finished job of the queue so far; the jobs of this test are found by their ids. */
const settle = (queue: Queue, finishedBefore: { count: number }, jobs: ReadonlyArray<{ name: string; data: Data }>) =>
  Effect.gen(function*() {
    const added = yield* Effect.promise(() => queue.addBulk(jobs.map((job) => ({ name: job.name, data: job.data }))))
    finishedBefore.count += added.length
    const { completed, failed } = yield* waitFor(
      "every job has finished",
      allFinished(queue, finishedBefore.count),
      { limit: "90 seconds", every: "200 millis" }
    )
    const ids = new Set(added.map((job) => job.id))
    const ours = (list: ReadonlyArray<Job>) => list.filter((job) => job.id !== undefined && ids.has(job.id))
    return { completed: ours(completed), failed: ours(failed) }
  })

const resultOf = (job: Job) => job.returnvalue as Result

const reserve = (account: Account, session: string, amount: string, extra: Data = {}) => ({
  name: "reserve",
  data: { account_id: account.id, session_id: session, amount_usd: amount, idempotency_key: randomUUID(), ...extra }
})
const release = (account: Account, session: string) => ({
  name: "release",
  data: { account_id: account.id, session_id: session, idempotency_key: randomUUID() }
})
const spend = (account: Account, session: string, amount: string, extra: Data = {}) => ({
  name: "spend",
  data: { account_id: account.id, session_id: session, amount_usd: amount, idempotency_key: randomUUID(), ...extra }
})

layer(ProcessTestDatabase(), { excludeTestServices: true, timeout: "300 seconds" })(
  "fleet controls (D19) across two worker processes",
  (it) => {
    describe("as runners meet them", () => {
      it.scoped("concurrency, new repositories, warnings, raises, labels and models", () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const sql = yield* SqlClient.SqlClient
          const books = yield* Books
          const prefix = `${config.redisPrefix}:fleet`
          const queue = yield* settlementQueue(config, prefix)
          const environment = serviceEnvironment(config, prefix)
          const workers: ReadonlyArray<Child> = yield* Effect.all(
            [startService("worker", environment), startService("worker", environment)],
            { concurrency: "unbounded" }
          )
          yield* waitFor("both workers are registered with the queue", workerCount(queue, 2), {
            limit: "30 seconds",
            alive: workers
          })
          const finished = { count: 0 }
          const openSessions = (account: Account) =>
            Effect.map(
              sql<{ open: number }>`
                SELECT count(*)::int AS open FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
                WHERE w.account_id = ${account.id} AND s.state = 'open' AND (s.held_usd > 0 OR s.spent_usd > 0)`,
              ([row]) => row?.open ?? -1
            )
          const eventsOf = (account: Account, type: string) =>
            sql<{ data: Data }>`
              SELECT data FROM account_events WHERE account_id = ${account.id} AND type = ${type} ORDER BY position`
          const expectBooks = (account: Account) =>
            Effect.map(books.verify(Option.some(account.id)), (verdict) => expect(verdict.mismatches).toEqual([]))

          // 200 sessions at once under max_open_sessions 20: exactly 20 open, never 21.
          const fanOut = yield* newAccount("1000")
          const [concurrency] = yield* saveLimits(fanOut, [
            { scope: "account", scope_id: null, period: "concurrent", max_open_sessions: 20 }
          ])
          const first = yield* settle(
            queue,
            finished,
            Array.from({ length: 200 }, (_, i) => reserve(fanOut, `fan-${i}`, "1"))
          )
          expect(first.failed).toEqual([])
          const applied = first.completed.filter((job) => resultOf(job).status === "applied")
          const refused = first.completed.filter((job) => resultOf(job).status === "limit_reached")
          expect([applied.length, refused.length]).toEqual([20, 180])
          for (const job of refused) {
            expect(resultOf(job)).toMatchObject({
              max_reservable_usd: "0.000000",
              limit: {
                id: concurrency?.id,
                period: "concurrent",
                amount_usd: null,
                max_open_sessions: 20,
                open_sessions: 20
              }
            })
          }
          expect(yield* openSessions(fanOut)).toBe(20)
          // A session already open is never refused by it.
          const openOne = String(applied[0]?.data.session_id)
          const again = yield* settle(queue, finished, [reserve(fanOut, openOne, "1")])
          expect(again.completed.map(resultOf).map((r) => r.status)).toEqual(["applied"])
          // As ten close, ten new ones open, and no more.
          const closing = applied.slice(0, 10).map((job) => String(job.data.session_id))
          yield* settle(queue, finished, closing.map((session) => release(fanOut, session)))
          expect(yield* openSessions(fanOut)).toBe(10)
          const second = yield* settle(
            queue,
            finished,
            Array.from({ length: 30 }, (_, i) => reserve(fanOut, `fan-again-${i}`, "1"))
          )
          expect(second.completed.filter((job) => resultOf(job).status === "applied")).toHaveLength(10)
          expect(yield* openSessions(fanOut)).toBe(20)
          yield* expectBooks(fanOut)

          // The first sessions of a repository that had none, in parallel, against its new limit.
          const fresh = yield* newAccount("1000")
          const [repository] = yield* sql<{ id: string }>`
            INSERT INTO repositories (account_kind, account_id, name) VALUES ('user', ${fresh.id}, 'fresh')
            RETURNING id`
          const repositoryId = repository?.id ?? ""
          yield* saveLimits(fresh, [
            { scope: "repository", scope_id: repositoryId, period: "day", amount_usd: "5" },
            { scope: "repository", scope_id: repositoryId, period: "concurrent", max_open_sessions: 15 }
          ])
          const firsts = yield* settle(
            queue,
            finished,
            Array.from({ length: 40 }, (_, i) => reserve(fresh, `repo-${i}`, "0.25", { repository_id: repositoryId }))
          )
          expect(firsts.failed).toEqual([])
          const held = firsts.completed.filter((job) => resultOf(job).status === "applied")
          // 15 may open; 15 × 0.25 = 3.75 fits the 5 dollars: the concurrency limit decides.
          expect(held).toHaveLength(15)
          const [wallet] = yield* sql<{ reserved: string }>`
            SELECT reserved_usd::text AS reserved FROM wallets WHERE account_id = ${fresh.id}`
          expect(wallet?.reserved).toBe("3.750000")
          // The dollars decide for the sessions that are open: 5 - 3.75 leaves 1.25 to reserve.
          const more = yield* settle(
            queue,
            finished,
            held.slice(0, 10).map((job) => reserve(fresh, String(job.data.session_id), "0.25"))
          )
          expect(more.completed.filter((job) => resultOf(job).status === "applied")).toHaveLength(5)
          const past = more.completed.find((job) => resultOf(job).status === "limit_reached")
          expect(past === undefined ? undefined : resultOf(past).max_reservable_usd).toBe("0.000000")
          yield* expectBooks(fresh)

          // Fifty sessions crossing a 50 % warning at once: one `limit.approaching`, one `limit.reached`.
          const warned = yield* newAccount("1000")
          yield* saveLimits(warned, [
            { scope: "account", scope_id: null, period: "day", amount_usd: "10", warn_at_percent: [50, 90] }
          ])
          const crossing = yield* settle(
            queue,
            finished,
            Array.from({ length: 50 }, (_, i) => reserve(warned, `warn-${i}`, "0.2"))
          )
          expect(crossing.completed.filter((job) => resultOf(job).status === "applied")).toHaveLength(50)
          const approaching = yield* eventsOf(warned, "limit.approaching")
          expect(approaching.map((event) => event.data.percent)).toEqual([50, 90])
          expect(approaching[0]?.data).toMatchObject({ limit: { amount_usd: "10.000000" } })
          expect(Number(approaching[0]?.data.used_usd)).toBeGreaterThanOrEqual(5)
          expect(yield* eventsOf(warned, "limit.reached")).toHaveLength(1)
          // A refusal after it says what still fits: nothing.
          const over = yield* settle(queue, finished, [reserve(warned, "warn-over", "0.2")])
          expect(over.completed.map(resultOf)).toEqual([
            expect.objectContaining({ status: "limit_reached", max_reservable_usd: "0.000000" })
          ])
          expect(yield* eventsOf(warned, "limit.approaching")).toHaveLength(2)

          // A raise whose `until` passes mid-test: the base applies from then on, with no write.
          const raised = yield* newAccount("1000")
          const until = new Date(Date.now() + 6_000)
          yield* saveLimits(raised, [
            { scope: "account", scope_id: null, period: "day", amount_usd: "1", raise: { amount_usd: "3", until } }
          ])
          const [setBefore] = yield* sql<{ version: number }>`
            SELECT version FROM spend_limit_sets WHERE account_id = ${raised.id}`
          const during = yield* settle(queue, finished, [reserve(raised, "raised-1", "2.5")])
          expect(during.completed.map(resultOf).map((r) => r.status)).toEqual(["applied"])
          yield* Effect.sleep(Math.max(0, until.getTime() - Date.now() + 200))
          const after = yield* settle(queue, finished, [reserve(raised, "raised-2", "0.5")])
          expect(after.completed.map(resultOf)).toEqual([
            expect.objectContaining({
              status: "limit_reached",
              max_reservable_usd: "0.000000",
              limit: expect.objectContaining({ amount_usd: "1.000000", used_usd: "2.500000" })
            })
          ])
          const [setAfter] = yield* sql<{ version: number }>`
            SELECT version FROM spend_limit_sets WHERE account_id = ${raised.id}`
          expect(setAfter?.version).toBe(setBefore?.version)

          // Labels and models: a label's concurrency limit, labels inherited, models on the books.
          const labelled = yield* newAccount("1000")
          yield* saveLimits(labelled, [
            { scope: "label", scope_id: "team=infra", period: "concurrent", max_open_sessions: 2 }
          ])
          const infra = { labels: { team: "infra", agent: "fixer" } }
          const tagged = yield* settle(queue, finished, [
            reserve(labelled, "infra-1", "1", infra),
            reserve(labelled, "infra-2", "1", infra),
            reserve(labelled, "infra-3", "1", infra),
            reserve(labelled, "web-1", "1", { labels: { team: "web" } })
          ])
          const statusOf = (session: string) =>
            tagged.completed.filter((job) => job.data.session_id === session).map((job) => resultOf(job).status)
          expect(["infra-1", "infra-2", "infra-3", "web-1"].map(statusOf).flat().sort()).toEqual([
            "applied",
            "applied",
            "applied",
            "limit_reached"
          ])
          const infraOpen = ["infra-1", "infra-2", "infra-3"].filter((s) => statusOf(s)[0] === "applied")
          const infraSession = infraOpen[0] ?? ""
          const followUp = yield* settle(queue, finished, [
            reserve(labelled, infraSession, "1"),
            spend(labelled, infraSession, "0.75", { model: "claude-sonnet-4" }),
            reserve(labelled, infraSession, "1", { labels: { team: "web" } }),
            reserve(labelled, "bad-labels", "1", { labels: { Team: "x" } }),
            spend(labelled, infraSession, "0.1", { model: "a\u0007b" })
          ])
          expect(followUp.completed.map(resultOf).map((r) => r.status).sort()).toEqual(["applied", "applied"])
          const reasons = followUp.failed.map((job) => job.failedReason).sort()
          expect(reasons).toEqual([
            expect.stringMatching(/^invalid_payload: .*labels key "Team"/),
            expect.stringMatching(/^invalid_payload: .*model must not contain control characters/),
            expect.stringMatching(/^session_attribution_mismatch: .*labels/)
          ])
          const [entry] = yield* sql<{ model: string | null; labels: Data | null }>`
            SELECT e.model, e.labels FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
            WHERE w.account_id = ${labelled.id} AND e.kind = 'spend'`
          expect(entry).toEqual({ model: "claude-sonnet-4", labels: { agent: "fixer", team: "infra" } })
          const [total] = yield* sql<{ model: string | null; labels: Data | null; spent: string }>`
            SELECT t.model, t.labels, t.spent_usd::text AS spent FROM settlement_spend_totals t
            JOIN wallets w ON w.id = t.wallet_id WHERE w.account_id = ${labelled.id}`
          expect(total).toEqual({
            model: "claude-sonnet-4",
            labels: { agent: "fixer", team: "infra" },
            spent: "0.750000"
          })
          yield* expectBooks(labelled)

          // Both processes took part.
          const takers = new Set(
            (yield* Effect.promise(() => queue.getJobs(["completed"], 0, -1))).map((job) => job.processedBy)
          )
          expect(takers.size).toBe(2)
        }).pipe(Effect.provide(Books.Default)))
    })
  }
)
