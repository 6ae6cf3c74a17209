import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { Account } from "../Domain/Account.js"
import { IdempotencyInProgress, IdempotencyKeyReused } from "../Domain/Wallet.js"
import { inTransaction } from "../Sql/Errors.js"
import { WalletsRepo } from "./Repo.js"

/** An idempotency key and what it is being used for (D6). */
export interface IdempotencyClaim {
  readonly key: string
  /** The endpoint, e.g. `PUT /developer/account/wallet`: the same key on another endpoint is another request. */
  readonly endpoint: string
  /** From `requestFingerprint`: the amount as a number and the note. */
  readonly fingerprint: string
}

/**
 * What an idempotent mutation answers: its own value, or the first success's result under its
 * key, as the client received it then (encoded). Only successes are recorded (D6), so
 * how a replay is told to the client is the handler's business.
 */
export type IdempotentOutcome<A> =
  | { readonly _tag: "Applied"; readonly value: A }
  | { readonly _tag: "Replayed"; readonly result: unknown }

/** Wallet mutations at most once per (account, idempotency key), with the first success replayed (D6). */
export class WalletIdempotency extends Effect.Service<WalletIdempotency>()("Wallets/Idempotency", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* WalletsRepo

    /**
     * Runs a wallet mutation at most once per (account, key) (D6). In one
     * transaction: claims the key without waiting (409 in progress while
     * another request holds it), replays the recorded first success of the
     * same request, refuses another request under a used key, else runs
     * `mutation` and records its result. A failure rolls back the mutation and
     * records nothing, so a retry runs again.
     */
    const once = <A, I, E, R>(
      account: Account,
      claim: IdempotencyClaim,
      /** What the mutation answers, as the record keeps it: the wallet, a credit's wallet and grant, a grant. */
      answer: Schema.Schema<A, I>,
      mutation: Effect.Effect<A, E, R>
    ): Effect.Effect<IdempotentOutcome<A>, E | IdempotencyInProgress | IdempotencyKeyReused, R> =>
      Effect.gen(function*() {
        const { claimed } = yield* repo.tryClaimKey({ account, key: claim.key })
        if (!claimed) {
          return yield* new IdempotencyInProgress({
            detail: "A request with this idempotency_key is still being processed; retry in a moment."
          })
        }
        const record = yield* repo.findIdempotencyRecord({ account, key: claim.key })
        if (Option.isSome(record)) {
          if (record.value.endpoint === claim.endpoint && record.value.request_fingerprint === claim.fingerprint) {
            return { _tag: "Replayed", result: record.value.response_body } as const
          }
          return yield* new IdempotencyKeyReused({
            detail: "This idempotency_key was used for a different request; a new action needs a new key."
          })
        }
        const value = yield* mutation
        const body = yield* Schema.encode(answer)(value).pipe(Effect.orDie)
        yield* repo.insertIdempotencyRecord({
          account,
          key: claim.key,
          endpoint: claim.endpoint,
          request_fingerprint: claim.fingerprint,
          response_body: JSON.stringify(body)
        }).pipe(
          // Unreachable while the key is claimed, but a key recorded twice is a duplicate, never a 500.
          Effect.catchTag("KeyRecorded", () =>
            new IdempotencyInProgress({
              detail: "A request with this idempotency_key was processed meanwhile; retry."
            }))
        )
        return { _tag: "Applied", value } as const
      }).pipe(inTransaction(sql), Effect.withSpan("WalletIdempotency.once"))

    return { once } as const
  }),
  dependencies: [WalletsRepo.Default]
}) {}
