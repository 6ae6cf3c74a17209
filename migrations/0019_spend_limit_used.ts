import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D16 (docs/decisions/D16-spend-controls.md): a limit's use, as one function of the database, so
 * that the limits' GET and the settlement batch's state read (src/Settlement/Transition.ts) count
 * it by the same rule in their own statements.
 *
 * `used` is the spends booked in the limit's current UTC period (`first_day` to `end_day`,
 * exclusive) by the sessions in its scope, from the running totals, plus the holds those sessions
 * have open now: the wallet's reserved balance for the account, the open sessions' holds for a
 * repository or a user. For a session limit, the largest held + spent among the open sessions it
 * governs (those without a `max_usd` of their own). Six decimals, as every amount reads (D6).
 * Each lookup is an equality on an indexed column, so a generic plan is as good as a custom one.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE FUNCTION spend_limit_used(
      scope text, scope_id uuid, wallet_id uuid, wallet_reserved numeric, first_day date, end_day date
    ) RETURNS numeric LANGUAGE sql STABLE AS $$
      SELECT (CASE
        WHEN wallet_id IS NULL THEN 0
        WHEN scope = 'session' THEN (
          SELECT coalesce(max(s.held_usd + s.spent_usd), 0) FROM settlement_sessions s
          WHERE s.wallet_id = spend_limit_used.wallet_id AND s.state = 'open' AND s.max_usd IS NULL)
        ELSE (
          SELECT coalesce(sum(t.spent_usd), 0) FROM settlement_spend_totals t
          WHERE t.wallet_id = spend_limit_used.wallet_id AND t.day >= first_day AND t.day < end_day
            AND (scope = 'account' OR (scope = 'repository' AND t.repository_id = spend_limit_used.scope_id)
              OR (scope = 'user' AND t.user_id = spend_limit_used.scope_id)))
        + CASE
          WHEN scope = 'account' THEN wallet_reserved
          ELSE (
            SELECT coalesce(sum(s.held_usd), 0) FROM settlement_sessions s
            WHERE s.wallet_id = spend_limit_used.wallet_id AND s.state = 'open'
              AND ((scope = 'repository' AND s.repository_id = spend_limit_used.scope_id)
                OR (scope = 'user' AND s.user_id = spend_limit_used.scope_id)))
          END
      END)::numeric(30, 6)
    $$`
})
