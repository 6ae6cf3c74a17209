import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D13, D16 (docs/decisions/D16-spend-controls.md, "A limit's use by scope key"): what `ledger
 * verify` reads of the counters by scope key, as a read model of the settlement feature. Each row
 * is a counter that disagrees with the rows it follows (the running totals, which verify checks
 * against the spend entries, and the open sessions, which it checks against their entries):
 * a day's spends of a scope key (`day` set), or a key's open holds and open sessions (`day`
 * null). Read by wallet, each branch by its index.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE VIEW settlement_scope_counter_disagreements AS
      SELECT wallet_id, scope, scope_key, day, sum(found_usd) AS found_usd, sum(expected_usd) AS expected_usd,
        sum(found_open)::integer AS found_open, sum(expected_open)::integer AS expected_open
      FROM (
        SELECT c.wallet_id, c.scope, c.scope_key, c.day, c.spent_usd AS found_usd, 0::numeric AS expected_usd,
          0 AS found_open, 0 AS expected_open
        FROM settlement_scope_totals c
        UNION ALL
        SELECT t.wallet_id, k.scope, k.scope_key, t.day, 0, t.spent_usd, 0, 0
        FROM settlement_spend_totals t CROSS JOIN LATERAL settlement_scope_keys(t.repository_id, t.user_id, t.labels) k
        UNION ALL
        SELECT h.wallet_id, h.scope, h.scope_key, NULL, h.held_usd, 0, h.open_sessions, 0
        FROM settlement_scope_holds h
        UNION ALL
        SELECT s.wallet_id, k.scope, k.scope_key, NULL, 0, s.held_usd, 0,
          CASE WHEN s.held_usd > 0 OR s.spent_usd > 0 THEN 1 ELSE 0 END
        FROM settlement_sessions s CROSS JOIN LATERAL settlement_scope_keys(s.repository_id, s.user_id, s.labels) k
        WHERE s.state = 'open'
      ) counted
      GROUP BY wallet_id, scope, scope_key, day
      HAVING sum(found_usd) <> sum(expected_usd) OR sum(found_open) <> sum(expected_open)`
})
