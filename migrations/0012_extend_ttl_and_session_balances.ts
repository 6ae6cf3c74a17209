import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // An extend's hold time is part of what its key was used for (D8, D12): the same key with another
  // `ttl_seconds` is another job. Records made before this column have none, and are then compared
  // without it.
  yield* sql`ALTER TABLE settlement_records ADD COLUMN ttl_seconds integer`
  // The settlement feature's read model of its sessions' balances: what the books' verifier (D13)
  // compares with the ledger, without reading the table the settlement feature alone writes.
  yield* sql`
    CREATE VIEW settlement_session_balances AS
      SELECT wallet_id, session_id, held_usd, spent_usd, unfunded_usd FROM settlement_sessions`
})
