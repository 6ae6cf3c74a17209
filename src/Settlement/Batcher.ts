import { Deferred, Effect, Exit } from "effect"

interface Pending<A, B, E> {
  readonly item: A
  readonly done: Deferred.Deferred<B, E>
}

/**
 * Coalesces work per key: while one batch for a key runs, what arrives for the
 * same key waits and goes into the next batch, up to `maxBatch` at a time.
 * Under light load a batch holds one item (no added latency); under load on a
 * hot key it holds many, so one commit serves them all. Keys never wait on
 * each other.
 *
 * `run` answers one Exit per item, in order: one item's failure never fails
 * its neighbours.
 */
export const makeBatcher = <A, B, E>(options: {
  readonly maxBatch: number
  readonly run: (key: string, items: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<Exit.Exit<B, E>>>
}) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const queues = new Map<string, Array<Pending<A, B, E>>>()

    const drain = (key: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const queue = queues.get(key)
        if (queue === undefined || queue.length === 0) {
          queues.delete(key)
          return Effect.void
        }
        const batch = queue.splice(0, options.maxBatch)
        return options.run(key, batch.map((pending) => pending.item)).pipe(
          Effect.exit,
          Effect.flatMap((outcome) =>
            Effect.forEach(batch, (pending, index) => {
              const exit: Exit.Exit<B, E> = Exit.isSuccess(outcome)
                ? outcome.value[index] ?? Exit.die(new Error("the batch answered fewer results than items"))
                : Exit.failCause(outcome.cause)
              return Deferred.done(pending.done, exit)
            }, { discard: true })
          ),
          Effect.zipRight(drain(key))
        )
      })

    /** Adds the item to its key's next batch and waits for its own result. */
    const submit = (key: string, item: A): Effect.Effect<B, E> =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<B, E>()
        const queue = queues.get(key)
        if (queue === undefined) {
          queues.set(key, [{ item, done }])
          yield* Effect.forkIn(drain(key), scope)
        } else {
          queue.push({ item, done })
        }
        return yield* Deferred.await(done)
      })

    return { submit } as const
  })

export type Batcher<A, B, E> = Effect.Effect.Success<ReturnType<typeof makeBatcher<A, B, E>>>
