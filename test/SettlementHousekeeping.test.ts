import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, type Duration, Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import { EXPIRE_HOLDS, HOUSEKEEPING_QUEUE } from "../src/Settlement/Housekeeping.js"
import { jobIdOf, SETTLEMENT_JOB_OPTIONS, SettlementResult } from "../src/Settlement/Jobs.js"
import { privatePostgres } from "./support/privatePostgres.js"
import { serviceEnvironment, settlementQueue, startService, waitFor } from "./support/processes.js"
import { settlementJobsIn } from "./support/settlementLoad.js"
import { ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * The hold-expiry sweep runs on a queue of its own (D8): whatever its runs keep of
 * themselves, the settlement queue's finished jobs — the results runners read, the failed
 * jobs operators retry — are kept as long as the settlement queue keeps them, not trimmed
 * to the sweep's last hundred runs. A day of sweeps (1,440 at one a minute) is compressed
 * into a minute or so by running the sweep every 25 ms. PostgreSQL is stopped for a while,
 * as in the trial that found it: spends fail for good, and so do the sweep's runs, whose
 * "keep the last hundred failed" used to empty the settlement queue's failed set.
 */

const SWEEP_EVERY_MS = 25
const DAY_OF_SWEEPS = 1_440
const FAILED = 150
const COMPLETED = 200

class PrivatePostgres extends Context.Tag("test/PrivatePostgres")<
  PrivatePostgres,
  Effect.Effect.Success<ReturnType<typeof privatePostgres>>
>() {}

/** The file's database on a PostgreSQL server of its own, which the test stops: the shared one is never touched. */
const OnPrivatePostgres = Layer.unwrapScoped(
  Effect.map(
    privatePostgres("account_api"),
    (server) =>
      ProcessTestDatabase({ DATABASE_URL: server.url }).pipe(Layer.merge(Layer.succeed(PrivatePostgres, server)))
  )
)

const decodeResult = Schema.decodeUnknownSync(SettlementResult)

layer(OnPrivatePostgres, { excludeTestServices: true, timeout: "240 seconds" })(
  "the hold-expiry sweep's own queue (D8)",
  (it) => {
    describe("a day of sweeps", () => {
      it.scoped(
        "leaves every failed settlement job in the failed set, retryable, and every completed result readable",
        () =>
          Effect.gen(function*() {
            const config = yield* AppConfig
            const prefix = `${config.redisPrefix}:housekeeping`
            const settlement = yield* settlementQueue(config, prefix)
            const housekeeping = yield* settlementQueue(config, prefix, HOUSEKEEPING_QUEUE)
            // A deployment from before the housekeeping queue: its scheduler on the settlement queue, trimming
            // that queue's finished jobs to its own last hundred runs.
            const oldRetention = { count: 100, age: 86_400 }
            yield* Effect.promise(() =>
              settlement.upsertJobScheduler(EXPIRE_HOLDS, { every: SWEEP_EVERY_MS }, {
                name: EXPIRE_HOLDS,
                opts: { removeOnComplete: oldRetention, removeOnFail: oldRetention }
              })
            )

            const server = yield* PrivatePostgres
            const sql = yield* SqlClient.SqlClient
            const account = yield* newAccount("100000")
            const reserves = Array.from({ length: COMPLETED }, (_, i) => ({
              account_id: account.id,
              session_id: `kept-${i}`,
              amount_usd: "2.00",
              idempotency_key: randomUUID()
            }))
            const spends = Array.from({ length: FAILED }, (_, i) => ({
              account_id: account.id,
              session_id: `kept-${i}`,
              amount_usd: "1.00",
              idempotency_key: randomUUID()
            }))
            const idsOf = (payloads: ReadonlyArray<{ readonly idempotency_key: string }>) =>
              payloads.map((data) => jobIdOf(account.id, data.idempotency_key)).sort()

            const worker = yield* startService(
              "worker",
              serviceEnvironment(config, prefix, { RESERVATION_SWEEP_EVERY_MS: String(SWEEP_EVERY_MS) })
            )
            const settled = waitFor(
              "every settlement job has been taken and finished",
              Effect.promise(() => settlement.getJobCounts("wait", "active")).pipe(
                Effect.map((counts) =>
                  (counts.wait ?? 0) + (counts.active ?? 0) === 0 ? Option.some(counts) : Option.none()
                )
              ),
              { limit: "60 seconds", every: "250 millis", alive: [worker] }
            )
            const sweepRuns = Effect.promise(() => housekeeping.getJobScheduler(EXPIRE_HOLDS)).pipe(
              Effect.map((scheduler) => scheduler?.iterationCount ?? 0)
            )
            const sweptAtLeast = (what: string, runs: number, limit: Duration.DurationInput) =>
              waitFor(
                what,
                Effect.map(sweepRuns, (count) => count >= runs ? Option.some(count) : Option.none()),
                { limit, every: "250 millis", alive: [worker] }
              )

            yield* Effect.promise(() =>
              settlement.addBulk(reserves.map((data) => ({
                name: "reserve",
                data,
                opts: { ...SETTLEMENT_JOB_OPTIONS, jobId: jobIdOf(account.id, data.idempotency_key) }
              })))
            )
            yield* settled
            // Started, the worker took the scheduler off the settlement queue: it runs on its own queue now.
            expect(yield* Effect.promise(() => settlement.getJobScheduler(EXPIRE_HOLDS))).toBeUndefined()

            // PostgreSQL goes away: spends fail for good (one attempt each here, as when the attempts run out),
            // and so does every sweep run while it is away.
            yield* server.stopImmediately
            yield* Effect.promise(() =>
              settlement.addBulk(spends.map((data) => ({
                name: "spend",
                data,
                opts: { attempts: 1, jobId: jobIdOf(account.id, data.idempotency_key) }
              })))
            )
            yield* settled
            yield* sweptAtLeast(
              "sweeps have run and failed while PostgreSQL is away",
              (yield* sweepRuns) + 200,
              "60 seconds"
            )
            yield* server.start
            const runs = yield* sweptAtLeast(
              `the sweep has run ${DAY_OF_SWEEPS} times more`,
              (yield* sweepRuns) + DAY_OF_SWEEPS,
              "180 seconds"
            )
            const failed = yield* Effect.promise(() => settlementJobsIn(settlement, ["failed"]))
            const completed = yield* Effect.promise(() => settlementJobsIn(settlement, ["completed"]))
            const sweepsKept = yield* Effect.promise(() => housekeeping.getJobCounts("completed", "failed"))
            yield* Effect.logInfo("after a day of sweeps").pipe(Effect.annotateLogs({
              sweep_runs: runs,
              failed_kept: failed.length,
              completed_kept: completed.length,
              sweep_runs_kept: sweepsKept
            }))

            // Every failed job is still there, with its reason, as an operator retrieves it.
            expect(failed.map((job) => job.id).sort()).toEqual(idsOf(spends))
            for (const job of failed) expect(job.failedReason).not.toBe("")
            // Every result is still readable by its job id.
            expect(completed.map((job) => job.id).sort()).toEqual(idsOf(reserves))
            for (const job of completed) expect(decodeResult(job.returnvalue)).toMatchObject({ status: "applied" })
            // The sweep's own runs are trimmed on their queue: Redis may not evict (D14), so nothing grows for ever.
            expect((sweepsKept.completed ?? 0) + (sweepsKept.failed ?? 0)).toBeLessThanOrEqual(200)

            // PostgreSQL is back: an operator retries the failed spends, and each applies once.
            yield* Effect.promise(() => Promise.all(failed.map((job) => job.retry("failed"))))
            const retried = yield* waitFor(
              "every retried spend has completed",
              Effect.promise(async () => {
                const states = await Promise.all(failed.map((job) => settlement.getJobState(job.id ?? "")))
                if (!states.every((state) => state === "completed")) return Option.none()
                return Option.some(await Promise.all(failed.map((job) => settlement.getJob(job.id ?? ""))))
              }),
              { limit: "60 seconds", every: "250 millis", alive: [worker] }
            )
            for (const job of retried) {
              expect(decodeResult(job?.returnvalue)).toMatchObject({ status: "applied", unfunded_usd: "0.000000" })
            }
            const spent = yield* sql<{ count: string }>`
            SELECT count(*)::text AS count FROM ledger_entries WHERE kind = 'spend' AND session_id LIKE 'kept-%'`
            expect(spent).toEqual([{ count: String(FAILED) }])
            expect(yield* Effect.promise(() => settlement.getFailedCount())).toBe(0)
          }),
        240_000
      )
    })
  }
)
