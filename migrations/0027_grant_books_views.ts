import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D13, D21 (docs/decisions/D21-credit-grants.md, "The books"): what `ledger verify` and the drift
 * check read of the grants and of the sessions' earmarks, as read models of the features that
 * write them, so the books read neither table as rows nor know how the earmarks are stored.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // The wallet feature's grants as the books replay them: the money, the state and whether it ended.
  yield* sql`
    CREATE VIEW wallet_grant_balances AS
      SELECT wallet_id, id AS grant_id, entry_id, amount_usd, drawn_usd, held_usd, ended_usd, state, ended_at
      FROM wallet_grants`
  // The settlement feature's open sessions' earmarks, one row per session and grant: summed per
  // grant, they are the grant's held amount.
  yield* sql`
    CREATE VIEW settlement_session_earmarks AS
      SELECT s.wallet_id, s.session_id, e.grant_id, e.amount_usd
      FROM settlement_sessions s, jsonb_to_recordset(s.earmarks) AS e (grant_id text, amount_usd numeric)
      WHERE s.state = 'open' AND s.earmarks IS NOT NULL`
})
