import { type Job, UnrecoverableError, Worker } from "bullmq"
import { Cause, Effect, Either, Exit, FiberRef, FiberRefs, Layer, LogLevel, ParseResult, Runtime, Schema } from "effect"
import { hostname } from "node:os"
import { AppConfig } from "../Config.js"
import { refusalMessage } from "../Domain/SettlementSession.js"
import { logDraining } from "../Logging.js"
import { Settlement, type SettlementFailure, SettlementRejected } from "../Settlement.js"
import { bullConnection } from "./Connection.js"
import { EXPIRE_HOLDS, SettlementHousekeepingLive, sweepHolds } from "./Housekeeping.js"
import {
  isSettlementKind,
  SETTLEMENT_JOB_RETENTION,
  SETTLEMENT_QUEUE,
  type SettlementJob,
  SettlementPayloads,
  type SettlementResult
} from "./Jobs.js"
import { SettlementMetrics } from "./Metrics.js"

/** A payload that does not decode fails at once, with the reason, and applies nothing (D8). */
const decodeJob = (job: Job): Either.Either<SettlementJob, SettlementRejected> => {
  const kind = job.name
  if (!isSettlementKind(kind)) {
    return Either.left(
      new SettlementRejected({ message: refusalMessage("unknown_job_kind", `unknown job name "${kind}"`) })
    )
  }
  return Schema.decodeUnknownEither(SettlementPayloads[kind] as Schema.Schema<SettlementJob["payload"], unknown>)(
    job.data
  ).pipe(
    Either.map((payload) => ({ kind, payload }) as SettlementJob),
    Either.mapLeft((error) =>
      new SettlementRejected({
        message: refusalMessage(
          "invalid_payload",
          `invalid ${kind} payload: ${
            ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) =>
              `${issue.path.join(".") || "payload"} ${issue.message}`
            ).join("; ")
          }`
        )
      })
    )
  )
}

/**
 * The settlement worker (D8): takes jobs from the `settlement` queue and
 * applies them through the Settlement service. Many jobs run at once so that
 * those of one wallet can share a transaction. On shutdown it stops taking
 * jobs, lets those in flight finish, then closes its connections.
 */
const SettlementJobWorkerLive = Layer.scopedDiscard(Effect.gen(function*() {
  const settlement = yield* Settlement
  const metrics = yield* SettlementMetrics
  const { concurrency, lockDurationMs, maxStalledCount, stalledIntervalMs } = (yield* AppConfig).settlement
  const runtime = yield* Effect.runtime<never>()

  const runFork = Runtime.runFork(runtime)
  const runPromise = Runtime.runPromise(runtime)
  const logsEachJob = LogLevel.greaterThanEqual(
    LogLevel.Info,
    FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMinimumLogLevel)
  )

  /** Counts and logs a job's result, and answers BullMQ: its return value, or what it throws to retry or fail. */
  const finish = (job: Job, exit: Exit.Exit<SettlementResult, SettlementFailure>, seconds: number) => {
    if (Exit.isSuccess(exit)) {
      metrics.recordJob(job.name, exit.value.status, seconds)
      if (logsEachJob) {
        runFork(
          Effect.logInfo("settlement job").pipe(Effect.annotateLogs({
            job_id: job.id,
            kind: job.name,
            status: exit.value.status,
            attempt: job.attemptsMade + 1,
            duration_ms: Math.round(seconds * 1e6) / 1e3
          }))
        )
      }
      return exit.value
    }
    const failure = Cause.squash(exit.cause)
    const unrecoverable = failure instanceof SettlementRejected
    metrics.recordJob(job.name, unrecoverable ? "invalid" : "retry", seconds)
    const reason = failure instanceof Error ? failure.message : String(failure)
    runFork(
      Effect.logWarning("settlement job not applied").pipe(Effect.annotateLogs({
        job_id: job.id,
        kind: job.name,
        attempt: job.attemptsMade + 1,
        reason,
        retried: !unrecoverable
      }))
    )
    // BullMQ decides on retries by what is thrown: UnrecoverableError fails the job for good.
    throw unrecoverable ? new UnrecoverableError(reason) : new Error(reason)
  }

  /**
   * BullMQ's processor. A settlement job joins its batch through a callback, not a fiber of its
   * own: a worker takes thousands a second, and a fiber per job cost more than the job's share of
   * its transaction.
   */
  const processJob = (job: Job): Promise<unknown> => {
    // A sweep run the settlement queue's scheduler queued before an upgrade moved it (Housekeeping.ts).
    if (job.name === EXPIRE_HOLDS) return sweepHolds(runPromise, settlement)
    const started = performance.now()
    return new Promise<Exit.Exit<SettlementResult, SettlementFailure>>((resolve) => {
      const decoded = decodeJob(job)
      if (Either.isLeft(decoded)) resolve(Exit.fail(decoded.left))
      else settlement.offer(decoded.right, resolve)
    }).then((exit) => finish(job, exit, (performance.now() - started) / 1000))
  }

  // The worker's own connection, apart from the queue's; BullMQ leaves a connection it is given open, the scope closes it.
  const { connection: workerConnection, prefix, report } = yield* bullConnection
  // Jobs taken and not finished, for the `draining` line (D9).
  let inFlight = 0
  const counted = (job: Job): Promise<unknown> => {
    inFlight += 1
    return processJob(job).finally(() => {
      inFlight -= 1
    })
  }
  const worker = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Worker(SETTLEMENT_QUEUE, counted, {
        connection: workerConnection,
        prefix,
        // Stored on each job it takes (`processedBy`): an operator sees which process ran a job.
        name: `${hostname()}:${process.pid}`,
        concurrency,
        autorun: true,
        maxStalledCount,
        ...SETTLEMENT_JOB_RETENTION,
        // How soon jobs of a worker that died are taken up again: once their lock has lapsed, at the next stalled check.
        stalledInterval: stalledIntervalMs,
        lockDuration: lockDurationMs
      })
    ),
    // close() stops taking jobs and waits for those in flight (D8: SIGTERM drains).
    (worker) =>
      Effect.zipRight(
        Effect.suspend(() => logDraining({ jobs_in_flight: inFlight })),
        Effect.promise(() => worker.close())
      )
  )
  worker.on("error", report)
  yield* Effect.promise(() => worker.waitUntilReady())
  yield* Effect.logInfo("settlement worker started").pipe(Effect.annotateLogs({ concurrency }))
}))

/** The settlement worker and, beside it on its own queue, the hold-expiry sweep. */
export const SettlementWorkerLive = Layer.merge(SettlementJobWorkerLive, SettlementHousekeepingLive)
