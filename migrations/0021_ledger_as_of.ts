import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D19 (docs/decisions/D19-fleet-controls.md, "Balances in the past"): the wallet's balances at a
 * past time are the after-values of its entry with the latest `created_at` at or before it, ties
 * by the greatest sequence. This index finds that entry in one backward probe whatever the
 * ledger's length: the wallet, then the time, then the sequence, in the order the read sorts by.
 * One narrow index (no included columns), since every entry the settlement writes pays for it.
 *
 * Built in the migrations' transaction, so writes to the ledger wait while it is built (seconds
 * per million entries). `IF NOT EXISTS` lets an operator with a large ledger build it first with
 * `CREATE INDEX CONCURRENTLY` under this name, and the migration then keeps it.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX IF NOT EXISTS ledger_entries_wallet_time_idx ON ledger_entries (wallet_id, created_at, sequence)`
})
