import { type Job, QueueEvents } from "bullmq"
import { Duration, Effect, Either, Schema } from "effect"
import { AppConfig } from "../Config.js"
import { bullConnection } from "./Connection.js"
import {
  type ExtendPayload,
  jobIdOf,
  type ReleasePayload,
  type ReservePayload,
  SETTLEMENT_JOB_OPTIONS,
  SETTLEMENT_JOB_RETENTION,
  SETTLEMENT_QUEUE,
  type SettlementKind,
  SettlementPayloads,
  SettlementResult,
  type SpendPayload
} from "./Jobs.js"
import { SettlementQueue } from "./Queue.js"

/** A job found gone is added again after this pause, so a Redis that keeps losing it is not hammered. */
const LOST_JOB_PAUSE_MS = 100

export class SettlementEnqueueError extends Schema.TaggedError<SettlementEnqueueError>()("SettlementEnqueueError", {
  message: Schema.String
}) {}

export interface Enqueued {
  readonly job: Job
  /** Waits for the worker's result; fails if the job fails for good or the wait times out. */
  readonly result: (timeout?: Duration.DurationInput) => Effect.Effect<SettlementResult, SettlementEnqueueError>
}

/**
 * The typed producer session runners use (D8): validates the payload, derives
 * the job id from the idempotency key, sets the retry policy, and can wait for
 * the result.
 */
export class SettlementProducer extends Effect.Service<SettlementProducer>()("Settlement/Producer", {
  scoped: Effect.gen(function*() {
    const { connection, prefix } = yield* bullConnection
    const recoverAfterMs = Duration.toMillis((yield* AppConfig).settlement.recoverAfter)
    const queue = yield* SettlementQueue
    // Every result wait listens for the queue's "closing"; a runner may wait on any number of jobs at once.
    queue.setMaxListeners(0)
    // QueueEvents blocks on its connection, so BullMQ reads on a duplicate of this one that it opens and closes itself.
    const events = yield* Effect.acquireRelease(
      Effect.sync(() => new QueueEvents(SETTLEMENT_QUEUE, { connection, prefix })),
      (events) => Effect.promise(() => events.close())
    )
    yield* Effect.promise(() => events.waitUntilReady())

    const decodeResult = Schema.decodeUnknown(SettlementResult)

    const enqueue = <K extends SettlementKind>(kind: K, payload: typeof SettlementPayloads[K]["Type"]) =>
      Effect.gen(function*() {
        const valid = yield* Schema.validate(SettlementPayloads[kind] as Schema.Schema<typeof payload>)(payload).pipe(
          Effect.mapError((error) => new SettlementEnqueueError({ message: error.message }))
        )
        const add = Effect.tryPromise({
          try: () =>
            queue.add(kind, valid, {
              ...SETTLEMENT_JOB_OPTIONS,
              jobId: jobIdOf(valid.account_id, valid.idempotency_key),
              ...SETTLEMENT_JOB_RETENTION
            }),
          catch: (error) => new SettlementEnqueueError({ message: String(error) })
        })
        const job = yield* add
        const waitFor = (millis: number) =>
          Effect.tryPromise({
            try: () => job.waitUntilFinished(events, millis),
            catch: (error) =>
              new SettlementEnqueueError({ message: error instanceof Error ? error.message : String(error) })
          })
        /**
         * Waits in rounds of `recoverAfter`. A round without a result adds the job again under
         * its id: BullMQ ignores that while it has the job, and re-creates a job Redis lost
         * (restored from an old snapshot, flushed); the database applies its key once (D14).
         */
        const result = (timeout: Duration.DurationInput = "30 seconds") =>
          Effect.gen(function*() {
            const total = Duration.toMillis(timeout)
            for (let waited = 0;;) {
              const round = Math.min(recoverAfterMs, total - waited)
              const outcome = yield* Effect.either(waitFor(round))
              if (Either.isRight(outcome)) {
                return yield* decodeResult(outcome.right).pipe(
                  Effect.mapError((error) => new SettlementEnqueueError({ message: error.message }))
                )
              }
              // BullMQ says "Missing key" at once when the job is gone, "timed out" after the round.
              const lost = /Missing key/.test(outcome.left.message)
              waited += lost ? LOST_JOB_PAUSE_MS : round
              if (!(lost || /timed out/.test(outcome.left.message)) || waited >= total) return yield* outcome.left
              if (lost) yield* Effect.sleep(LOST_JOB_PAUSE_MS)
              yield* add
            }
          })
        return { job, result } satisfies Enqueued
      })

    return {
      queue,
      enqueueReserve: (payload: ReservePayload) => enqueue("reserve", payload),
      enqueueSpend: (payload: SpendPayload) => enqueue("spend", payload),
      enqueueRelease: (payload: ReleasePayload) => enqueue("release", payload),
      /** The hold heartbeat (D12): keeps an open session's hold from lapsing. */
      enqueueExtend: (payload: ExtendPayload) => enqueue("extend", payload)
    } as const
  }),
  dependencies: [SettlementQueue.Default]
}) {}
