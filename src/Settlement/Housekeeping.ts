import { Queue, Worker } from "bullmq"
import { Cause, Effect, Layer, Runtime } from "effect"
import { hostname } from "node:os"
import { AppConfig } from "../Config.js"
import { Settlement } from "../Settlement.js"
import { bullConnection } from "./Connection.js"
import { SettlementQueue } from "./Queue.js"

/** The scheduled job that releases holds past their time (D8). */
export const EXPIRE_HOLDS = "expire-holds"
/**
 * The sweep's own queue, beside `settlement`, under the same prefix. BullMQ applies a
 * finished job's `removeOnComplete`/`removeOnFail` to its queue's whole finished sets: on the
 * settlement queue, the sweep's "keep my last hundred runs" trimmed everyone's results and
 * failed jobs to a hundred. Here it trims only runs of the sweep, and operators' job lists
 * (the dashboard shows `settlement` only) hold settlement jobs alone.
 */
export const HOUSEKEEPING_QUEUE = "settlement-housekeeping"
/** Finished sweep runs kept for operators to look at: a day's worth at most. */
const SWEEP_RUNS_KEPT = { count: 100, age: 86_400 } as const

/** One run of the sweep for BullMQ: the holds it released, or the failure it throws so the run counts as failed. */
export const sweepHolds = (runPromise: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>, settlement: Settlement) =>
  runPromise(Effect.map(settlement.expireHolds(), (released) => ({ released }))).catch((error: unknown) => {
    throw Runtime.isFiberFailure(error) ? Cause.squash(error[Runtime.FiberFailureCauseId]) : error
  })

/**
 * The hold-expiry sweep (D8): a job scheduler on the housekeeping queue, run by a worker of
 * its own in every worker process. The scheduler makes one run per interval whatever the
 * number of processes; a hold is released once however many runs meet it (D14).
 */
export const SettlementHousekeepingLive = Layer.scopedDiscard(Effect.gen(function*() {
  const settlement = yield* Settlement
  const { lockDurationMs, stalledIntervalMs, sweepEveryMs } = (yield* AppConfig).settlement
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
      opts: { removeOnComplete: SWEEP_RUNS_KEPT, removeOnFail: SWEEP_RUNS_KEPT }
    })
  )

  // Its own connection, as the settlement worker has: BullMQ leaves a connection it is given open, the scope closes it.
  const { connection: workerConnection } = yield* bullConnection
  const worker = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Worker(HOUSEKEEPING_QUEUE, () => sweepHolds(runPromise, settlement), {
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
