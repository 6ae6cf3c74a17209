import { Queue } from "bullmq"
import { Effect } from "effect"
import { bullConnection } from "./Connection.js"
import { SETTLEMENT_QUEUE } from "./Jobs.js"

/** The `settlement` queue as a resource: producers, the dashboard and the depth gauge share it. */
export class SettlementQueue extends Effect.Service<SettlementQueue>()("Settlement/Queue", {
  scoped: Effect.gen(function*() {
    const { connection, prefix, report } = yield* bullConnection
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(SETTLEMENT_QUEUE, { connection, prefix })),
      (queue) => Effect.promise(() => queue.close())
    )
    // BullMQ writes an unheard error to the console as a raw stack trace, once per retry.
    queue.on("error", report)
    return queue
  })
}) {}
