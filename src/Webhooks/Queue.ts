import { Queue } from "bullmq"
import { Effect, Schema } from "effect"
import { RETRY_DELAYS_MS } from "../Domain/Webhooks.js"
import { bullConnection } from "../Settlement/Connection.js"

/** The delivery queue (D17), beside the settlement queue under the same BullMQ prefix. */
export const WEBHOOK_QUEUE = "webhooks"

/** A delivery job: the event as it is sent (its body is built from it) and the endpoint it goes to. */
export const DeliveryJob = Schema.Struct({
  event_id: Schema.UUID,
  endpoint_id: Schema.UUID,
  type: Schema.String,
  created_at: Schema.String,
  data: Schema.Unknown
})
export type DeliveryJob = typeof DeliveryJob.Type

/**
 * A delivery's job id: the pair event and endpoint, so adding it again (a relay that died after
 * adding it and before advancing its cursor) is a no-op while BullMQ keeps it. `.`, not `:`:
 * BullMQ refuses a custom id with one `:` (it reserves `a:b:c` for its repeatable jobs).
 */
export const deliveryJobId = (eventId: string, endpointId: string) => `${eventId}.${endpointId}`

/** A first attempt and one per wait of the schedule; each wait decided by the worker's backoff (Delivery.ts). */
export const DELIVERY_JOB_OPTIONS = {
  attempts: RETRY_DELAYS_MS.length + 1,
  backoff: { type: "webhook" },
  // Kept an hour after they end (the last 100,000 at most, so Redis's memory stays bounded under
  // load), so a job added again within it (by a relay that died before advancing its cursor, redone
  // by the next sweep within seconds) is recognised.
  removeOnComplete: { age: 3_600, count: 100_000 },
  removeOnFail: { age: 30 * 86_400 }
} as const

/** The delivery queue as a resource: the relay and redelivery add to it. */
export class WebhookQueue extends Effect.Service<WebhookQueue>()("Webhooks/Queue", {
  scoped: Effect.gen(function*() {
    const { connection, prefix, report } = yield* bullConnection
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(WEBHOOK_QUEUE, { connection, prefix })),
      (queue) => Effect.promise(() => queue.close())
    )
    queue.on("error", report)
    /** Adds the jobs, each under its id; resolves once Redis holds them all. */
    const add = (jobs: ReadonlyArray<{ readonly id: string; readonly job: DeliveryJob }>) =>
      jobs.length === 0 ? Effect.void : Effect.asVoid(Effect.tryPromise(() =>
        queue.addBulk(jobs.map(({ id, job }) => ({
          name: "deliver",
          data: job,
          opts: { ...DELIVERY_JOB_OPTIONS, jobId: id }
        })))
      ))
    return { queue, add } as const
  })
}) {}
