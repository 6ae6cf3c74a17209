import { Schema } from "effect"

/**
 * The typed producer's failures (D8), apart from the producer itself: they name nothing of
 * BullMQ, so the client package declares them to code that never loads BullMQ's types.
 */

export class SettlementEnqueueError extends Schema.TaggedError<SettlementEnqueueError>()("SettlementEnqueueError", {
  message: Schema.String
}) {}

/**
 * The job id this job derives was taken by another job (D8: whoever writes the queue first owns
 * the id). Its result is not this job's, so nothing is reported from it.
 */
export class SettlementJobIdTaken extends Schema.TaggedError<SettlementJobIdTaken>()("SettlementJobIdTaken", {
  job_id: Schema.String,
  message: Schema.String
}) {}
