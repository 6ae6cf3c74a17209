import type { Job, Queue, QueueEvents } from "bullmq"
import { Duration, Effect, Either, Schema } from "effect"
import {
  type ExtendPayload,
  jobIdOf,
  type ReleasePayload,
  type ReservePayload,
  SETTLEMENT_JOB_OPTIONS,
  SETTLEMENT_JOB_RETENTION,
  type SettlementKind,
  SettlementPayloads,
  SettlementResult,
  type SpendPayload,
  traceparentOf
} from "./Jobs.js"
import { SettlementEnqueueError, SettlementJobIdTaken } from "./ProducerErrors.js"

/**
 * The typed producer's core (D8), apart from where its connection comes from: the service
 * builds it on its configuration (`Producer.ts`), the client package on the options its user
 * passes. One implementation of the job options, the job id and the read-back check.
 */

/** A job found gone is added again after this pause, so a Redis that keeps losing it is not hammered. */
const LOST_JOB_PAUSE_MS = 100

/**
 * What a failed result wait means, read from BullMQ's message: the one place that knows its
 * wording. BullMQ says "Missing key" at once when the job is gone, "timed out" after the wait.
 */
export const resultWaitFailure = (message: string): "lost" | "timed_out" | "failed" =>
  /Missing key/.test(message) ? "lost" : /timed out/.test(message) ? "timed_out" : "failed"

/**
 * A value as JSON with every object's keys in order: the same labels (D19) given in another order
 * are the same job, as they are the same labels to the worker.
 */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, inner: unknown) =>
    typeof inner === "object" && inner !== null && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner)

/** The fields of the job read back that differ from the job sent; none when it is the job sent. */
const differences = (
  sent: { readonly name: string; readonly data: object },
  found: { readonly name: string; readonly data: unknown }
): ReadonlyArray<string> => {
  const data: Record<string, unknown> = typeof found.data === "object" && found.data !== null ? { ...found.data } : {}
  const own: Record<string, unknown> = { ...sent.data }
  const fields = [...new Set([...Object.keys(own), ...Object.keys(data)])].sort()
  return [
    ...(sent.name === found.name ? [] : ["kind"]),
    ...fields.filter((field) => canonical(own[field]) !== canonical(data[field]))
  ]
}

export interface Enqueued {
  readonly job: Job
  /** Waits for the worker's result; fails if the job fails for good or the wait times out. */
  readonly result: (
    timeout?: Duration.DurationInput
  ) => Effect.Effect<SettlementResult, SettlementEnqueueError | SettlementJobIdTaken>
}

export interface ProducerParts {
  /** The `settlement` queue, under the service's prefix. */
  readonly queue: Queue
  /** The queue's events, for result waits. */
  readonly events: QueueEvents
  /** A result wait that hears nothing for this long adds the job again (a Redis that lost it, D14). */
  readonly recoverAfter: Duration.DurationInput
}

/** Enqueues settlement jobs on `queue` and waits for their results on `events`. */
export const makeProducer = ({ events, queue, recoverAfter }: ProducerParts) => {
  const recoverAfterMs = Duration.toMillis(recoverAfter)
  // Every result wait listens for the queue's "closing"; a runner may wait on any number of jobs at once.
  queue.setMaxListeners(0)
  const decodeResult = Schema.decodeUnknown(SettlementResult)

  const enqueue = <K extends SettlementKind>(kind: K, payload: typeof SettlementPayloads[K]["Type"]) =>
    Effect.gen(function*() {
      const valid = yield* Schema.validate(SettlementPayloads[kind] as Schema.Schema<typeof payload>)(payload).pipe(
        Effect.mapError((error) => new SettlementEnqueueError({ message: error.message }))
      )
      const jobId = jobIdOf(valid.account_id, valid.idempotency_key)
      // The caller's span, if traced, so the worker's batch links to its trace (D18).
      const sent = { ...valid, ...traceparentOf(yield* Effect.option(Effect.currentSpan)) }
      /**
       * Adds the job, then reads back the job stored under its id: BullMQ keeps the first job
       * added under an id, whoever added it, so a job of another kind, account, key, amount or
       * session found there is another job, and its result must not be taken for this one's.
       */
      const add = Effect.gen(function*() {
        const job = yield* Effect.tryPromise({
          try: () => queue.add(kind, sent, { ...SETTLEMENT_JOB_OPTIONS, jobId, ...SETTLEMENT_JOB_RETENTION }),
          catch: (error) => new SettlementEnqueueError({ message: String(error) })
        })
        const stored = yield* Effect.tryPromise({
          try: () => queue.getJob(jobId),
          catch: (error) => new SettlementEnqueueError({ message: String(error) })
        })
        // Gone already (finished and removed, or lost): the result wait re-adds it if need be.
        if (stored === undefined) return job
        const differ = differences({ name: kind, data: sent }, { name: stored.name, data: stored.data })
        if (differ.length > 0) {
          return yield* new SettlementJobIdTaken({
            job_id: jobId,
            message: `job ${jobId} is another job (its ${differ.join(", ")} differ from this ${kind}'s): ` +
              "the id was taken by whoever added a job under it first; this job was not enqueued"
          })
        }
        return job
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
            const failure = resultWaitFailure(outcome.left.message)
            const lost = failure === "lost"
            waited += lost ? LOST_JOB_PAUSE_MS : round
            if (failure === "failed" || waited >= total) return yield* outcome.left
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
}
