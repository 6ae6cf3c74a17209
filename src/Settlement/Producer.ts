import { QueueEvents } from "bullmq"
import { Effect } from "effect"
import { AppConfig } from "../Config.js"
import { bullConnection } from "./Connection.js"
import { SETTLEMENT_QUEUE } from "./Jobs.js"
import { makeProducer } from "./ProducerCore.js"
import { SettlementQueue } from "./Queue.js"

export { type Enqueued, resultWaitFailure } from "./ProducerCore.js"
export { SettlementEnqueueError, SettlementJobIdTaken } from "./ProducerErrors.js"

/**
 * The typed producer session runners use (D8): validates the payload, derives
 * the job id from the idempotency key, sets the retry policy, and can wait for
 * the result. Its core (`ProducerCore.ts`) is the client package's producer too;
 * here it runs on the service's configuration.
 */
export class SettlementProducer extends Effect.Service<SettlementProducer>()("Settlement/Producer", {
  scoped: Effect.gen(function*() {
    const { connection, prefix, report } = yield* bullConnection
    const recoverAfter = (yield* AppConfig).settlement.recoverAfter
    const queue = yield* SettlementQueue
    // QueueEvents blocks on its connection, so BullMQ reads on a duplicate of this one that it opens and closes itself.
    const events = yield* Effect.acquireRelease(
      Effect.sync(() => new QueueEvents(SETTLEMENT_QUEUE, { connection, prefix })),
      (events) => Effect.promise(() => events.close())
    )
    // BullMQ writes an unheard error to the console as a raw stack trace, once per reconnect.
    events.on("error", report)
    yield* Effect.promise(() => events.waitUntilReady())
    return makeProducer({ queue, events, recoverAfter })
  }),
  dependencies: [SettlementQueue.Default]
}) {}
