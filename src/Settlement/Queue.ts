import { Queue } from "bullmq"
import { Effect } from "effect"
import { bullConnection } from "./Connection.js"
import { SETTLEMENT_QUEUE } from "./Jobs.js"

/** The `settlement` queue as a resource: producers, the dashboard and the depth gauge share it. */
export class SettlementQueue extends Effect.Service<SettlementQueue>()("Settlement/Queue", {
  scoped: Effect.gen(function*() {
    const { connection, prefix } = yield* bullConnection
    return yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(SETTLEMENT_QUEUE, { connection, prefix })),
      (queue) => Effect.promise(() => queue.close())
    )
  })
}) {}
