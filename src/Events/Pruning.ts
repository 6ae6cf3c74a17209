import { Effect, Layer, Schedule } from "effect"
import { Events } from "../Events.js"

/** Events deleted per statement: a short statement, however many are due. */
const BATCH = 1000
/** How often an API process looks for events past the 30 days they are kept (D17). */
const EVERY = "1 hour"

/**
 * Deletes the events older than 30 days, a batch at a time, at start and then hourly, in every API
 * process: the log's trigger refuses the deletion of anything younger, so a pruner can only ever
 * take what D17 lets go. Processes pruning at once skip each other's rows (no waits). A failure
 * (the database away) is logged and tried again at the next hour.
 */
export const EventsPruningLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const events = yield* Events
    const pruneAll = Effect.gen(function*() {
      let total = 0
      for (;;) {
        const deleted = yield* events.prune(BATCH)
        total += deleted
        if (deleted < BATCH) break
      }
      if (total > 0) yield* Effect.logInfo("events pruned").pipe(Effect.annotateLogs({ events_deleted: total }))
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("pruning events failed; trying again later", cause))
    )
    yield* Effect.forkScoped(Effect.repeat(pruneAll, Schedule.spaced(EVERY)))
  })
)
