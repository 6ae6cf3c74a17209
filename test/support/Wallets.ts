import { SqlClient } from "@effect/sql"
import { Deferred, Effect, type Fiber } from "effect"
import { randomUUID } from "node:crypto"
import { call, type Reply } from "./TestApp.js"

/** A fresh idempotency key, as a client would make one per logical action. */
export const newKey = () => randomUUID()

export const getWallet = (token: string) => call("GET", "/developer/account/wallet", { token })

export const putBudget = (token: string, body: Record<string, unknown>) =>
  call("PUT", "/developer/account/wallet", { token, body })

export const postCredit = (token: string, body: Record<string, unknown>) =>
  call("POST", "/developer/account/wallet/credits", { token, body })

export const getLedger = (token: string, query = "") =>
  call("GET", `/developer/account/wallet/ledger${query === "" ? "" : `?${query}`}`, { token })

export interface WalletBody {
  readonly id: string
  readonly owner_kind: string
  readonly owner_id: string
  readonly currency: string
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly available_usd: string
  readonly enforced: boolean
  readonly version: number
  readonly created_at: string
  readonly updated_at: string
}

export interface EntryBody {
  readonly id: string
  readonly sequence: number
  readonly kind: string
  readonly amount_usd: string
  readonly budget_after_usd: string
  readonly reserved_after_usd: string
  readonly spent_after_usd: string
  readonly available_after_usd: string
  readonly payment_provider: null
  readonly session_id: string | null
  readonly task_id: string | null
  readonly note: string | null
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly model: string | null
  readonly labels: Readonly<Record<string, string>>
  readonly created_at: string
}

export interface PageBody {
  readonly entries: ReadonlyArray<EntryBody>
  readonly next_before: string | null
}

export const walletOf = (reply: Reply) => reply.body as WalletBody
export const pageOf = (reply: Reply) => reply.body as PageBody

/**
 * Holds the wallet's row lock from another connection until the returned fiber
 * is interrupted or `millis` pass, as a long-running writer would.
 */
export const holdWalletLock = (accountId: string, millis: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const locked = yield* Deferred.make<void>()
    const fiber: Fiber.RuntimeFiber<void> = yield* sql.withTransaction(
      Effect.gen(function*() {
        yield* sql`SELECT id FROM wallets WHERE account_id = ${accountId} FOR UPDATE`
        yield* Deferred.succeed(locked, undefined)
        yield* Effect.sleep(millis)
      })
    ).pipe(Effect.orDie, Effect.fork)
    yield* Deferred.await(locked)
    return fiber
  })

/** Waits until some transaction of this database holds an advisory lock: an idempotency key is claimed. */
export const awaitClaimedKey = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (let attempt = 0; attempt < 200; attempt++) {
    const rows = yield* sql<{ readonly held: string }>`
      SELECT count(*) AS held FROM pg_locks
      WHERE locktype = 'advisory' AND granted
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
    if (rows[0] !== undefined && rows[0].held !== "0") return
    yield* Effect.sleep(10)
  }
  return yield* Effect.dieMessage("no idempotency key was claimed within 2 s")
}).pipe(Effect.orDie)
