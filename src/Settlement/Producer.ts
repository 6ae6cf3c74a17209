import { Duration, Effect, Schema } from "effect"
import { type Job, QueueEvents } from "bullmq"
import { bullConnection } from "./Connection.js"
import { SettlementQueue } from "./Queue.js"
import {
  jobIdOf,
  ReleasePayload,
  ReservePayload,
  SETTLEMENT_JOB_OPTIONS,
  SETTLEMENT_JOB_RETENTION,
  SETTLEMENT_QUEUE,
  SettlementPayloads,
  SettlementResult,
  type SettlementKind,
  SpendPayload
} from "./Jobs.js"

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
        const job = yield* Effect.tryPromise({
          try: () =>
            queue.add(kind, valid, {
              ...SETTLEMENT_JOB_OPTIONS,
              jobId: jobIdOf(valid.account_id, valid.idempotency_key),
              ...SETTLEMENT_JOB_RETENTION
            }),
          catch: (error) => new SettlementEnqueueError({ message: String(error) })
        })
        const result = (timeout: Duration.DurationInput = "30 seconds") =>
          Effect.tryPromise({
            try: () => job.waitUntilFinished(events, Duration.toMillis(timeout)),
            catch: (error) => new SettlementEnqueueError({ message: error instanceof Error ? error.message : String(error) })
          }).pipe(
            Effect.flatMap((value) =>
              decodeResult(value).pipe(Effect.mapError((error) => new SettlementEnqueueError({ message: error.message })))
            )
          )
        return { job, result } satisfies Enqueued
      })

    return {
      queue,
      enqueueReserve: (payload: ReservePayload) => enqueue("reserve", payload),
      enqueueSpend: (payload: SpendPayload) => enqueue("spend", payload),
      enqueueRelease: (payload: ReleasePayload) => enqueue("release", payload)
    } as const
  }),
  dependencies: [SettlementQueue.Default]
}) {}
