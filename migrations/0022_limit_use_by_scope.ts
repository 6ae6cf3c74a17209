import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D16, D19 (docs/decisions/D16-spend-controls.md, "A limit's use by scope key"): a limit's use
 * costs the same however many label values, models, users or sessions its period saw.
 *
 * A limit counts the sessions of one scope key: the account's (`account`, key ''), a repository's
 * (`repository`, its id), a user's (`user`, its id) or a label's (`label`, `key=value`). Two
 * counter tables by scope key are kept beside the rows they sum:
 *
 * - `settlement_scope_totals`: the spends booked per UTC day by the sessions of a scope key, from
 *   the report's running totals (`settlement_spend_totals`). A limit's spent in its period is at
 *   most 31 rows of its key, found by the primary key.
 * - `settlement_scope_holds`: what the open sessions of a scope key hold now, and how many of them
 *   count as open (D19: open, and holding or having spent something), from `settlement_sessions`.
 *   One row per key.
 *
 * They are written by statement triggers on the two tables they sum, with the statement's rows
 * (transition tables): once per statement, aggregated by key, in the statement that writes the
 * rows. The settlement transition's write is one statement, so its counters are written in it, no
 * round trip added, under the wallet's row lock it already holds; and any other writer of those
 * rows (a migration, an operator's repair) keeps them exact too. A session of a repository, a user
 * and ten labels moves at most 13 keys; most move one. Every limit, new, changed or ages old,
 * reads its key's rows, so saving limits computes nothing: a limit put in the middle of a month
 * counts the month's spends of its scope, as before.
 *
 * `spend_limit_use` is the one rule of "used" for the batch's read and the limits' GET: a SQL
 * function returning a table, so that the planner inlines it into the calling statement (no body
 * planned per call). It replaces migration 0020's `spend_limit_used` and
 * `spend_limit_open_sessions`.
 *
 * Filled here from the running totals and the open sessions, so books made before it read the
 * same use.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    CREATE TABLE settlement_scope_totals (
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      scope text NOT NULL,
      scope_key text NOT NULL,
      day date NOT NULL,
      spent_usd numeric(18, 6) NOT NULL DEFAULT 0,
      PRIMARY KEY (wallet_id, scope, scope_key, day)
    )`
  yield* sql`
    CREATE TABLE settlement_scope_holds (
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      scope text NOT NULL,
      scope_key text NOT NULL,
      held_usd numeric(18, 6) NOT NULL DEFAULT 0,
      open_sessions integer NOT NULL DEFAULT 0,
      PRIMARY KEY (wallet_id, scope, scope_key)
    ) WITH (fillfactor = 80)`

  // The scope keys of an attribution and labels: the account's, then the repository's, the user's
  // and one per label. Immutable, so the planner may inline it and fold it into the caller.
  yield* sql`
    CREATE FUNCTION settlement_scope_keys(repository_id uuid, user_id uuid, labels jsonb)
    RETURNS TABLE (scope text, scope_key text) LANGUAGE sql IMMUTABLE AS $$
      SELECT 'account', ''
      UNION ALL SELECT 'repository', repository_id::text WHERE repository_id IS NOT NULL
      UNION ALL SELECT 'user', user_id::text WHERE user_id IS NOT NULL
      UNION ALL SELECT 'label', l.key || '=' || l.value FROM jsonb_each_text(labels) l
    $$`

  yield* sql`
    INSERT INTO settlement_scope_totals (wallet_id, scope, scope_key, day, spent_usd)
    SELECT t.wallet_id, k.scope, k.scope_key, t.day, sum(t.spent_usd)
    FROM settlement_spend_totals t CROSS JOIN LATERAL settlement_scope_keys(t.repository_id, t.user_id, t.labels) k
    GROUP BY t.wallet_id, k.scope, k.scope_key, t.day
    HAVING sum(t.spent_usd) > 0`
  yield* sql`
    INSERT INTO settlement_scope_holds (wallet_id, scope, scope_key, held_usd, open_sessions)
    SELECT s.wallet_id, k.scope, k.scope_key, sum(s.held_usd),
      count(*) FILTER (WHERE s.held_usd > 0 OR s.spent_usd > 0)
    FROM settlement_sessions s CROSS JOIN LATERAL settlement_scope_keys(s.repository_id, s.user_id, s.labels) k
    WHERE s.state = 'open'
    GROUP BY s.wallet_id, k.scope, k.scope_key`

  // The counters follow the rows they sum: each statement's rows, the old taken off, the new added
  // (an insert has only new rows, a delete only old ones, an update both).
  type Op = "INSERT" | "UPDATE" | "DELETE"
  const moved = (op: Op, select: (sign: 1 | -1) => string) =>
    [
      ...(op === "DELETE" ? [] : [`${select(1)} FROM new_rows r`]),
      ...(op === "INSERT" ? [] : [`${select(-1)} FROM old_rows r`])
    ].join(" UNION ALL ")
  const byOperation = (statement: (op: Op) => string) => `
    IF TG_OP = 'INSERT' THEN ${statement("INSERT")};
    ELSIF TG_OP = 'UPDATE' THEN ${statement("UPDATE")};
    ELSE ${statement("DELETE")};
    END IF;`
  yield* sql.unsafe(`
    CREATE FUNCTION settlement_scope_totals_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      ${
    byOperation((op) => `
      INSERT INTO settlement_scope_totals AS c (wallet_id, scope, scope_key, day, spent_usd)
      SELECT m.wallet_id, k.scope, k.scope_key, m.day, sum(m.spent)
      FROM (${
      moved(op, (sign) =>
        `SELECT r.wallet_id, r.day, r.repository_id, r.user_id, r.labels, ${sign} * r.spent_usd AS spent`)
    }) m
      CROSS JOIN LATERAL settlement_scope_keys(m.repository_id, m.user_id, m.labels) k
      GROUP BY m.wallet_id, k.scope, k.scope_key, m.day
      HAVING sum(m.spent) <> 0
      ORDER BY m.wallet_id, k.scope, k.scope_key, m.day
      ON CONFLICT (wallet_id, scope, scope_key, day) DO UPDATE SET spent_usd = c.spent_usd + EXCLUDED.spent_usd`)
  }
      RETURN NULL;
    END $$`)
  yield* sql`
    CREATE TRIGGER settlement_scope_totals_follow_insert AFTER INSERT ON settlement_spend_totals
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settlement_scope_totals_follow()`
  yield* sql`
    CREATE TRIGGER settlement_scope_totals_follow_update AFTER UPDATE ON settlement_spend_totals
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settlement_scope_totals_follow()`
  yield* sql`
    CREATE TRIGGER settlement_scope_totals_follow_delete AFTER DELETE ON settlement_spend_totals
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION settlement_scope_totals_follow()`

  yield* sql.unsafe(`
    CREATE FUNCTION settlement_scope_holds_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      ${
    byOperation((op) => `
      INSERT INTO settlement_scope_holds AS c (wallet_id, scope, scope_key, held_usd, open_sessions)
      SELECT m.wallet_id, k.scope, k.scope_key, sum(m.held), sum(m.opened)
      FROM (${
      moved(op, (sign) =>
        `SELECT r.wallet_id, r.repository_id, r.user_id, r.labels,
          CASE WHEN r.state = 'open' THEN ${sign} * r.held_usd ELSE 0 END AS held,
          CASE WHEN r.state = 'open' AND (r.held_usd > 0 OR r.spent_usd > 0) THEN ${sign} ELSE 0 END AS opened`)
    }) m
      CROSS JOIN LATERAL settlement_scope_keys(m.repository_id, m.user_id, m.labels) k
      GROUP BY m.wallet_id, k.scope, k.scope_key
      HAVING sum(m.held) <> 0 OR sum(m.opened) <> 0
      ORDER BY m.wallet_id, k.scope, k.scope_key
      ON CONFLICT (wallet_id, scope, scope_key) DO UPDATE SET
        held_usd = c.held_usd + EXCLUDED.held_usd, open_sessions = c.open_sessions + EXCLUDED.open_sessions`)
  }
      RETURN NULL;
    END $$`)
  yield* sql`
    CREATE TRIGGER settlement_scope_holds_follow_insert AFTER INSERT ON settlement_sessions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settlement_scope_holds_follow()`
  yield* sql`
    CREATE TRIGGER settlement_scope_holds_follow_update AFTER UPDATE ON settlement_sessions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION settlement_scope_holds_follow()`
  yield* sql`
    CREATE TRIGGER settlement_scope_holds_follow_delete AFTER DELETE ON settlement_sessions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION settlement_scope_holds_follow()`

  yield* sql`DROP FUNCTION spend_limit_used(text, text, text, uuid, numeric, date, date)`
  yield* sql`DROP FUNCTION spend_limit_open_sessions(text, text, text, uuid)`

  // A limit's use (D16, D19): `used_usd` for a spend limit (null for a concurrency limit), the
  // spends booked in the period [first_day, end_day) by its scope key plus what its open sessions
  // hold (the wallet's reserved balance for the account); for a session limit, the largest
  // held + spent among the open sessions it governs (those without a `max_usd` of their own).
  // `open_sessions` for a concurrency limit (null otherwise). Every lookup is a probe of a primary
  // key or of the open sessions' index.
  yield* sql`
    CREATE FUNCTION spend_limit_use(
      period text, scope text, scope_id text, wallet_id uuid, wallet_reserved numeric, first_day date, end_day date
    ) RETURNS TABLE (used_usd numeric, open_sessions integer) LANGUAGE sql STABLE AS $$
      SELECT
        CASE
          WHEN period = 'concurrent' THEN NULL
          WHEN wallet_id IS NULL THEN 0::numeric(30, 6)
          WHEN scope = 'session' THEN (
            SELECT coalesce(max(s.held_usd + s.spent_usd), 0) FROM settlement_sessions s
            WHERE s.wallet_id = spend_limit_use.wallet_id AND s.state = 'open' AND s.max_usd IS NULL)::numeric(30, 6)
          ELSE ((
            SELECT coalesce(sum(t.spent_usd), 0) FROM settlement_scope_totals t
            WHERE t.wallet_id = spend_limit_use.wallet_id AND t.scope = spend_limit_use.scope
              AND t.scope_key = coalesce(spend_limit_use.scope_id, '')
              AND t.day >= spend_limit_use.first_day AND t.day < spend_limit_use.end_day)
          + CASE
            WHEN scope = 'account' THEN wallet_reserved
            ELSE coalesce((
              SELECT h.held_usd FROM settlement_scope_holds h
              WHERE h.wallet_id = spend_limit_use.wallet_id AND h.scope = spend_limit_use.scope
                AND h.scope_key = spend_limit_use.scope_id), 0)
            END)::numeric(30, 6)
        END,
        CASE
          WHEN period <> 'concurrent' THEN NULL
          ELSE coalesce((
            SELECT h.open_sessions FROM settlement_scope_holds h
            WHERE h.wallet_id = spend_limit_use.wallet_id AND h.scope = spend_limit_use.scope
              AND h.scope_key = coalesce(spend_limit_use.scope_id, '')), 0)
        END
    $$`
})
