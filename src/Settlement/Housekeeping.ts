import { type Job, Queue, Worker } from "bullmq"
import { Cause, Duration, Effect, Layer, Option, Runtime } from "effect"
import { hostname } from "node:os"
import { BOOKS_DRIFT_CHECK, BooksDrift } from "../Books/Drift.js"
import { AppConfig } from "../Config.js"
import { Settlement } from "../Settlement.js"
import { bullConnection } from "./Connection.js"
import { SettlementQueue } from "./Queue.js"

/** The scheduled job that releases holds past their time (D8). */
export const EXPIRE_HOLDS = "expire-holds"
/** The scheduled job that ends grants past their time and warns ahead of it (D21). */
export const EXPIRE_GRANTS = "expire-grants"
/** The scheduled job that removes the spends by the minute and quarter hour past keeping (D22). */
export const PRUNE_RECENT_SPENDS = "prune-recent-spends"
const PRUNE_EVERY_MS = 600_000
/**
 * The sweep's own queue, beside `settlement`, under the same prefix. BullMQ applies a
 * finished job's `removeOnComplete`/`removeOnFail` to its queue's whole finished sets: on the
 * settlement queue, the sweep's "keep my last hundred runs" trimmed everyone's results and
 * failed jobs to a hundred. Here it trims only runs of the sweep, and operators' job lists
 * (the dashboard shows `settlement` only) hold settlement jobs alone.
 */
export const HOUSEKEEPING_QUEUE = "settlement-housekeeping"
/** Finished runs kept for operators to look at: a day's worth at most. */
const RUNS_KEPT = { count: 100, age: 86_400 } as const

type RunPromise = <A, E>(effect: Effect.Effect<A, E>) => Promise<A>

/** A run's answer for BullMQ: its value, or the failure it throws so the run counts as failed. */
const forBullmq = <A, E>(runPromise: RunPromise, effect: Effect.Effect<A, E>) =>
  runPromise(effect).catch((error: unknown) => {
    throw Runtime.isFiberFailure(error) ? Cause.squash(error[Runtime.FiberFailureCauseId]) : error
  })

/** One run of the sweep: the holds it released. */
export const sweepHolds = (runPromise: RunPromise, settlement: Settlement) =>
  forBullmq(runPromise, Effect.map(settlement.expireHolds(), (released) => ({ released })))

/**
 * The hold-expiry sweep (D8), the grant sweep (D21), the prune of spends by the minute (D22) and the books drift check (D19): job schedulers on the housekeeping
 * queue, run by a worker of its own in every worker process. A scheduler makes one run per
 * interval whatever the number of processes; a hold is released once however many runs meet it
 * (D14). A new scheduler runs at once, then every interval; one that exists keeps its times.
 */
const HousekeepingLive = Layer.scopedDiscard(Effect.gen(function*() {
  const settlement = yield* Settlement
  const drift = yield* BooksDrift
  const config = yield* AppConfig
  const { grantSweepEveryMs, lockDurationMs, stalledIntervalMs, sweepEveryMs } = config.settlement
  const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())

  const { connection, prefix, report } = yield* bullConnection
  const queue = yield* Effect.acquireRelease(
    Effect.sync(() => new Queue(HOUSEKEEPING_QUEUE, { connection, prefix })),
    (queue) => Effect.promise(() => queue.close())
  )
  queue.on("error", report)
  // Earlier versions scheduled the sweep on the settlement queue itself; an upgraded deployment stops it there.
  const settlementQueue = yield* SettlementQueue
  yield* Effect.promise(() => settlementQueue.removeJobScheduler(EXPIRE_HOLDS))
  yield* Effect.promise(() =>
    queue.upsertJobScheduler(EXPIRE_HOLDS, { every: sweepEveryMs }, {
      name: EXPIRE_HOLDS,
      // A run a minute, forever: kept runs would grow Redis without bound (it must not evict, D14).
      opts: { removeOnComplete: RUNS_KEPT, removeOnFail: RUNS_KEPT }
    })
  )
  yield* Effect.promise(() =>
    queue.upsertJobScheduler(EXPIRE_GRANTS, { every: grantSweepEveryMs }, {
      name: EXPIRE_GRANTS,
      opts: { removeOnComplete: RUNS_KEPT, removeOnFail: RUNS_KEPT }
    })
  )
  yield* Effect.promise(() =>
    queue.upsertJobScheduler(PRUNE_RECENT_SPENDS, { every: PRUNE_EVERY_MS }, {
      name: PRUNE_RECENT_SPENDS,
      opts: { removeOnComplete: RUNS_KEPT, removeOnFail: RUNS_KEPT }
    })
  )
  const driftEvery = config.books.driftCheckEvery
  yield* Option.match(driftEvery, {
    onNone: () => Effect.promise(() => queue.removeJobScheduler(BOOKS_DRIFT_CHECK)),
    onSome: (every) =>
      Effect.promise(() =>
        queue.upsertJobScheduler(BOOKS_DRIFT_CHECK, { every: Duration.toMillis(every) }, {
          name: BOOKS_DRIFT_CHECK,
          opts: { removeOnComplete: RUNS_KEPT, removeOnFail: RUNS_KEPT }
        })
      )
  })
  /** A job by its name; a check queued before this worker's settings turned it off does nothing. */
  const run = (job: Job): Promise<unknown> => {
    if (job.name === EXPIRE_GRANTS) {
      return forBullmq(runPromise, Effect.map(settlement.expireGrants(), (wallets) => ({ wallets })))
    }
    if (job.name === PRUNE_RECENT_SPENDS) {
      return forBullmq(runPromise, Effect.map(settlement.pruneRecentSpends(), (removed) => ({ removed })))
    }
    if (job.name !== BOOKS_DRIFT_CHECK) return sweepHolds(runPromise, settlement)
    if (Option.isNone(driftEvery)) return Promise.resolve({ skipped: true })
    return forBullmq(runPromise, Effect.map(drift.check(), ({ checked_at, count }) => ({ count, checked_at })))
  }

  // Its own connection, as the settlement worker has: BullMQ leaves a connection it is given open, the scope closes it.
  const { connection: workerConnection } = yield* bullConnection
  const worker = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Worker(HOUSEKEEPING_QUEUE, run, {
        connection: workerConnection,
        prefix,
        name: `${hostname()}:${process.pid}`,
        concurrency: 1,
        autorun: true,
        lockDuration: lockDurationMs,
        stalledInterval: stalledIntervalMs
      })
    ),
    (worker) => Effect.promise(() => worker.close())
  )
  worker.on("error", report)
  yield* Effect.promise(() => worker.waitUntilReady())
}))

export const SettlementHousekeepingLive = HousekeepingLive.pipe(Layer.provide(BooksDrift.Default))
