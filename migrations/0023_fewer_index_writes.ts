import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Fewer index entries per settlement job (docs/architecture.md, "The settlement transition").
 *
 * - The open sessions' indexes by repository and by user (migration 0014) served a repository's
 *   or a user's limit summing its open holds; since migration 0022 those sums are counters by
 *   scope key, and no statement reads the sessions by repository or user any more. Every new
 *   session and every update that was not HOT wrote an entry in each.
 * - A session row is updated by most of its jobs (a spend moves `held_usd` and `spent_usd`, none
 *   of them indexed): with room left on its page (fillfactor 80) such an update is HOT, writing
 *   no index entry. The same for the wallets (every batch updates the row, no indexed column), the
 *   running totals and the counters by scope key (their sums only). Only pages written from now
 *   on keep the room; nothing is rewritten.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS settlement_sessions_repository_open_idx`
  yield* sql`DROP INDEX IF EXISTS settlement_sessions_user_open_idx`
  yield* sql`ALTER TABLE settlement_sessions SET (fillfactor = 80)`
  yield* sql`ALTER TABLE wallets SET (fillfactor = 80)`
  yield* sql`ALTER TABLE settlement_spend_totals SET (fillfactor = 80)`
  yield* sql`ALTER TABLE settlement_scope_totals SET (fillfactor = 80)`
})
