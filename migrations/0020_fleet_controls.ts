import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D19 (docs/decisions/D19-fleet-controls.md): concurrency limits, labels and models, warnings
 * before a limit, temporary raises, and what a refusal could have taken. Every column added here
 * is nullable or has a constant default, so no table is rewritten (nor the ledger's append-only
 * trigger lifted).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // Labels (a session's, set by its first reserve) and models (a spend's). Null when none: most
  // rows carry none, and the reads show `{}` and null.
  yield* sql`ALTER TABLE settlement_sessions ADD COLUMN labels jsonb`
  // The highest `warn_at_percent` of the account's session limit announced for this session:
  // "once per session and percentage" is kept with the session it is about.
  yield* sql`ALTER TABLE settlement_sessions ADD COLUMN warned_percent smallint NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE ledger_entries ADD COLUMN model text, ADD COLUMN labels jsonb`
  // What a refused reserve could have taken, answered again to its duplicates.
  yield* sql`ALTER TABLE settlement_records ADD COLUMN max_reservable_usd numeric(18, 6)`

  // The running totals by model and labels too, so the report groups by them without the ledger.
  yield* sql`ALTER TABLE settlement_spend_totals ADD COLUMN model text, ADD COLUMN labels jsonb`
  yield* sql`ALTER TABLE settlement_spend_totals DROP CONSTRAINT settlement_spend_totals_key`
  yield* sql`
    ALTER TABLE settlement_spend_totals ADD CONSTRAINT settlement_spend_totals_key
      UNIQUE NULLS NOT DISTINCT (wallet_id, day, repository_id, user_id, model, labels)`
  yield* sql`
    CREATE OR REPLACE VIEW settlement_spend_total_rows AS
      SELECT wallet_id, day, repository_id, user_id, spent_usd, unfunded_usd, sessions, model, labels
      FROM settlement_spend_totals`

  // Limits: a label scope (scope_id `key=value`, so the column becomes text; ids are stored lower
  // case as before), concurrency limits (no amount), warnings and raises.
  yield* sql`DROP FUNCTION spend_limit_used(text, uuid, uuid, numeric, date, date)`
  yield* sql`
    ALTER TABLE spend_limits
      DROP CONSTRAINT spend_limits_scope_check,
      DROP CONSTRAINT spend_limits_period_check,
      DROP CONSTRAINT spend_limits_check,
      DROP CONSTRAINT spend_limits_amount_usd_check,
      ALTER COLUMN scope_id TYPE text,
      ALTER COLUMN amount_usd DROP NOT NULL,
      ADD COLUMN max_open_sessions integer CHECK (max_open_sessions BETWEEN 1 AND 100000),
      ADD COLUMN warn_at_percent smallint[] NOT NULL DEFAULT '{}',
      ADD COLUMN raise_amount_usd numeric(18, 6),
      ADD COLUMN raise_until timestamptz,
      ADD CONSTRAINT spend_limits_scope_check CHECK (scope IN ('account', 'repository', 'user', 'label', 'session')),
      ADD CONSTRAINT spend_limits_period_check CHECK (period IN ('day', 'week', 'month', 'session', 'concurrent')),
      ADD CONSTRAINT spend_limits_scope_id_check CHECK ((scope IN ('repository', 'user', 'label')) = (scope_id IS NOT NULL)),
      ADD CONSTRAINT spend_limits_amount_check CHECK (
        CASE WHEN period = 'concurrent' THEN amount_usd IS NULL AND max_open_sessions IS NOT NULL
          ELSE amount_usd > 0 AND max_open_sessions IS NULL END),
      ADD CONSTRAINT spend_limits_raise_check CHECK (
        (raise_amount_usd IS NULL) = (raise_until IS NULL) AND (raise_amount_usd IS NULL OR raise_amount_usd > amount_usd))`

  // A limit's warnings are announced once per percentage and period, beside its `limit.reached`
  // (percent 100).
  yield* sql`ALTER TABLE settlement_limit_announcements ADD COLUMN percent smallint NOT NULL DEFAULT 100`
  yield* sql`ALTER TABLE settlement_limit_announcements DROP CONSTRAINT settlement_limit_announcements_pkey`
  yield* sql`ALTER TABLE settlement_limit_announcements ADD PRIMARY KEY (limit_id, period_start, percent)`

  // Whether a limit of `scope` and `scope_id` counts a session of this attribution and these labels.
  yield* sql`
    CREATE FUNCTION spend_limit_in_scope(
      scope text, scope_id text, repository_id uuid, user_id uuid, labels jsonb
    ) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE scope
        WHEN 'account' THEN true
        WHEN 'repository' THEN repository_id::text = scope_id
        WHEN 'user' THEN user_id::text = scope_id
        WHEN 'label' THEN labels ->> split_part(scope_id, '=', 1) = substr(scope_id, strpos(scope_id, '=') + 1)
        ELSE false
      END IS TRUE
    $$`

  // A spend limit's use, as migration 0019 counted it, any scope now; null for a concurrency limit.
  yield* sql`
    CREATE FUNCTION spend_limit_used(
      period text, scope text, scope_id text, wallet_id uuid, wallet_reserved numeric, first_day date, end_day date
    ) RETURNS numeric LANGUAGE sql STABLE AS $$
      SELECT CASE
        WHEN period = 'concurrent' THEN NULL
        WHEN wallet_id IS NULL THEN 0::numeric(30, 6)
        WHEN scope = 'session' THEN (
          SELECT coalesce(max(s.held_usd + s.spent_usd), 0) FROM settlement_sessions s
          WHERE s.wallet_id = spend_limit_used.wallet_id AND s.state = 'open' AND s.max_usd IS NULL)::numeric(30, 6)
        ELSE ((
          SELECT coalesce(sum(t.spent_usd), 0) FROM settlement_spend_totals t
          WHERE t.wallet_id = spend_limit_used.wallet_id AND t.day >= first_day AND t.day < end_day
            AND spend_limit_in_scope(scope, scope_id, t.repository_id, t.user_id, t.labels))
        + CASE
          WHEN scope = 'account' THEN wallet_reserved
          ELSE (
            SELECT coalesce(sum(s.held_usd), 0) FROM settlement_sessions s
            WHERE s.wallet_id = spend_limit_used.wallet_id AND s.state = 'open'
              AND spend_limit_in_scope(scope, scope_id, s.repository_id, s.user_id, s.labels))
          END)::numeric(30, 6)
      END
    $$`

  // A concurrency limit's use: the sessions in its scope that are open (D19: from the first
  // applied reserve, which leaves money held or spent, until they close); null for a spend limit.
  yield* sql`
    CREATE FUNCTION spend_limit_open_sessions(period text, scope text, scope_id text, wallet_id uuid)
    RETURNS integer LANGUAGE sql STABLE AS $$
      SELECT CASE WHEN period <> 'concurrent' THEN NULL ELSE (
        SELECT count(*)::integer FROM settlement_sessions s
        WHERE s.wallet_id = spend_limit_open_sessions.wallet_id AND s.state = 'open'
          AND (s.held_usd > 0 OR s.spent_usd > 0)
          AND spend_limit_in_scope(scope, scope_id, s.repository_id, s.user_id, s.labels)) END
    $$`
})
