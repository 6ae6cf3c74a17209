import { Effect, Exit, FiberSet } from "effect"

/** An item waiting for its batch, under the key whose items must be applied in arrival order. */
export interface Keyed<A> {
  readonly key: string
  readonly item: A
}

interface Pending<A, B, E> extends Keyed<A> {
  /** Called once, with the item's own result. A callback, not a Deferred: one runs per item. */
  readonly done: (exit: Exit.Exit<B, E>) => void
}

/**
 * Coalesces work: items that arrive while batches are running wait and go
 * together into the next batch, up to `maxBatch` items and `maxRunning`
 * batches at a time. Under light load a batch holds one item (no added
 * latency); under load it holds many, so one transaction serves them all,
 * whether they share a key or not.
 *
 * Items of one key are never in two running batches: a key's items go to
 * `run` in arrival order, and those that arrive while its batch runs wait for
 * the next. Other keys never wait on a busy one.
 *
 * `run` answers one Exit per item, in order: one item's failure never fails
 * its neighbours.
 */
export const makeBatcher = <A, B, E>(options: {
  readonly maxBatch: number
  readonly maxRunning: number
  readonly run: (items: ReadonlyArray<Keyed<A>>) => Effect.Effect<ReadonlyArray<Exit.Exit<B, E>>>
}) =>
  Effect.gen(function*() {
    // Batches run as fibers of the caller's scope (interrupted when it closes), started from plain code.
    const runFork = yield* FiberSet.makeRuntime<never>()
    let waiting: Array<Pending<A, B, E>> = []
    const busy = new Set<string>()
    let running = 0

    /** The next batch: waiting items of keys that are not busy, oldest first. */
    const take = (): Array<Pending<A, B, E>> => {
      const batch: Array<Pending<A, B, E>> = []
      const left: Array<Pending<A, B, E>> = []
      for (const pending of waiting) {
        if (batch.length < options.maxBatch && !busy.has(pending.key)) batch.push(pending)
        else left.push(pending)
      }
      waiting = left
      return batch
    }

    const runBatch = (batch: ReadonlyArray<Pending<A, B, E>>): Effect.Effect<void> =>
      options.run(batch).pipe(
        Effect.exit,
        Effect.map((outcome) =>
          batch.forEach((pending, index) =>
            pending.done(
              Exit.isSuccess(outcome)
                ? outcome.value[index] ?? Exit.die(new Error("the batch answered fewer results than items"))
                : Exit.failCause(outcome.cause)
            )
          )
        ),
        Effect.ensuring(Effect.sync(() => {
          running -= 1
          for (const pending of batch) busy.delete(pending.key)
          start()
        }))
      )

    /** Starts batches while there is room and something to run. */
    const start = () => {
      while (running < options.maxRunning) {
        const batch = take()
        if (batch.length === 0) return
        running += 1
        for (const pending of batch) busy.add(pending.key)
        runFork(runBatch(batch))
      }
    }

    /**
     * Adds the item to the next batch; `done` is called once with its own result. For callers
     * outside Effect (a queue's processor), so no fiber waits for each item.
     */
    const offer = (key: string, item: A, done: (exit: Exit.Exit<B, E>) => void): void => {
      waiting.push({ key, item, done })
      start()
    }

    /** Adds the item to the next batch and waits for its own result. */
    const submit = (key: string, item: A): Effect.Effect<B, E> =>
      Effect.async<B, E>((resume) => offer(key, item, resume))

    return { submit, offer } as const
  })

export type Batcher<A, B, E> = Effect.Effect.Success<ReturnType<typeof makeBatcher<A, B, E>>>
