import { Effect } from "effect"

/** What the promise rejects with, or a failure of the test if it resolves. */
export const rejection = <A>(promise: Promise<A>) =>
  Effect.promise(() =>
    promise.then(
      (value) => ({ resolved: value }) as const,
      (error: unknown) => ({ rejected: error }) as const
    )
  ).pipe(Effect.flatMap((outcome) =>
    "rejected" in outcome
      ? Effect.succeed(outcome.rejected)
      : Effect.dieMessage(`expected a rejection, got ${JSON.stringify(outcome.resolved)}`)
  ))
