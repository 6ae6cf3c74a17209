import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D22 (docs/decisions/D22-limits-where-people-live.md): limits in the account's time zone, by the
 * clock hour and over rolling windows, for every member of a kind, judged in the settlement
 * transaction as D16's and D19's are.
 *
 * - `account_settings`: the account's zone and week start, versioned (D5). `carried` keeps, per
 *   period kind, the period that was in force when they last changed: it keeps its bounds, and
 *   the next one starts at its end (`account_period`), so no spend is counted twice or lost.
 * - `account_period`: the one rule of a period's bounds, for the batch's read, the limits' reads
 *   and the settings' write alike: the clock hour, the day from local midnight (23 or 25 hours
 *   across a daylight-saving change), the week from `week_start`, the month, in the zone.
 * - `settlement_scope_recent`: what the sessions of a scope key spent by the minute (grain 1) and
 *   the quarter hour (grain 15), written by the settlement transition beside the day counters of
 *   migration 0022. Every zone's offset is a whole number of quarter hours, so a period in any
 *   zone is whole UTC days (0022's rows) and quarter hours at its edges; a rolling window is
 *   quarter hours and minutes at its edges. Kept 35 days (a month's edges), pruned by the
 *   housekeeping loop.
 * - `limit_use`: a limit's use between two instants, replacing 0022's `spend_limit_use` (which
 *   took whole UTC days). Every lookup is a probe of a primary key range.
 * - The spend report's days: each running total names the account's local day beside its UTC day.
 * - Limits: the scopes `each_user`, `each_repository`, `each_label` (its `scope_id` the label
 *   key), the periods `hour` and `rolling` (`window_minutes`, 5 to 10,080); a limit is one of its
 *   scope, scope id, period and window. Announcements are per scope key (a member's own use of an
 *   `each_` limit) and period start instant.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`
    CREATE TABLE account_settings (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      timezone text NOT NULL DEFAULT 'UTC',
      week_start text NOT NULL DEFAULT 'monday' CHECK (week_start IN ('monday', 'sunday')),
      carried jsonb NOT NULL DEFAULT '{}',
      version integer NOT NULL CHECK (version > 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_kind, account_id)
    )`

  // The settings as the periods' readers (the settlement transition, the limits' reads) take them.
  yield* sql`
    CREATE VIEW account_period_settings AS
      SELECT account_kind, account_id, timezone, week_start, carried FROM account_settings`

  // The period of a kind holding `at` in a zone, ignoring any change of zone: the clock hour (the
  // zone's offset at `at`, so both 01:00s of a November night are hours of their own), the local
  // day, the week from its first day, the month. Null bounds for the kinds without any.
  yield* sql`
    CREATE FUNCTION account_natural_period(period text, timezone text, week_start text, at timestamptz)
    RETURNS TABLE (period_start timestamptz, period_end timestamptz) LANGUAGE sql STABLE AS $$
      WITH local AS (
        SELECT at AT TIME ZONE timezone AS t, (at AT TIME ZONE timezone) - (at AT TIME ZONE 'UTC') AS offset_by
      ), first_local AS (
        SELECT CASE period
          WHEN 'hour' THEN date_trunc('hour', t)
          WHEN 'day' THEN date_trunc('day', t)
          WHEN 'week' THEN date_trunc('day', t) - make_interval(days => CASE week_start
            WHEN 'sunday' THEN extract(dow FROM t)::integer ELSE extract(isodow FROM t)::integer - 1 END)
          WHEN 'month' THEN date_trunc('month', t)
        END AS s, offset_by
        FROM local
      )
      SELECT
        CASE WHEN period = 'hour' THEN (s - offset_by) AT TIME ZONE 'UTC' ELSE s AT TIME ZONE timezone END,
        CASE period
          WHEN 'hour' THEN (s - offset_by + interval '1 hour') AT TIME ZONE 'UTC'
          WHEN 'day' THEN (s + interval '1 day') AT TIME ZONE timezone
          WHEN 'week' THEN (s + interval '7 days') AT TIME ZONE timezone
          WHEN 'month' THEN (s + interval '1 month') AT TIME ZONE timezone
        END
      FROM first_local
      WHERE s IS NOT NULL
    $$`

  // The period holding `at` under the account's settings: the one carried over a change while it
  // lasts, then the zone's, the first of them starting where the carried one ended.
  yield* sql`
    CREATE FUNCTION account_period(period text, timezone text, week_start text, carried jsonb, at timestamptz)
    RETURNS TABLE (period_start timestamptz, period_end timestamptz) LANGUAGE sql STABLE AS $$
      SELECT
        CASE WHEN c.e IS NOT NULL AND at < c.e AND at >= c.s THEN c.s
          WHEN c.e IS NOT NULL AND at >= c.e THEN greatest(n.period_start, c.e)
          ELSE n.period_start END,
        CASE WHEN c.e IS NOT NULL AND at < c.e AND at >= c.s THEN c.e ELSE n.period_end END
      FROM account_natural_period(period, timezone, week_start, at) n
      LEFT JOIN LATERAL (
        SELECT (carried -> period ->> 0)::timestamptz AS s, (carried -> period ->> 1)::timestamptz AS e
      ) c ON true
    $$`

  // What a change of settings at `at` carries: each kind's period in force then.
  yield* sql`
    CREATE FUNCTION account_carried_periods(timezone text, week_start text, carried jsonb, at timestamptz)
    RETURNS jsonb LANGUAGE sql STABLE AS $$
      SELECT coalesce(jsonb_object_agg(k.period, jsonb_build_array(p.period_start, p.period_end)), '{}')
      FROM unnest(ARRAY['hour', 'day', 'week', 'month']) AS k (period)
      CROSS JOIN LATERAL account_period(k.period, timezone, week_start, carried, at) p
    $$`

  yield* sql`
    CREATE TABLE settlement_scope_recent (
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      scope text NOT NULL,
      scope_key text NOT NULL,
      grain smallint NOT NULL CHECK (grain IN (1, 15)),
      at timestamptz NOT NULL,
      spent_usd numeric(18, 6) NOT NULL DEFAULT 0,
      PRIMARY KEY (wallet_id, scope, scope_key, grain, at)
    )`
  // Where the housekeeping loop finds what is past keeping, whatever the number of scope keys: a
  // block range index, a few pages for the whole table (rows are added in time order), which the
  // batch's lookups by scope key never prefer to the primary key (a btree on the time would be
  // taken for a window's lookups, reading every wallet's rows of the window).
  yield* sql`CREATE INDEX settlement_scope_recent_age_idx ON settlement_scope_recent USING brin (at)`
  // The last 35 days' spends, from the entries that booked them (spends' amounts, as the running
  // totals count them), so an account's first zoned period after this migration counts them too.
  yield* sql`
    INSERT INTO settlement_scope_recent (wallet_id, scope, scope_key, grain, at, spent_usd)
    SELECT e.wallet_id, k.scope, k.scope_key, g.grain,
      date_bin(make_interval(mins => g.grain), e.created_at, '2000-01-01T00:00:00Z'), sum(e.amount_usd)
    FROM ledger_entries e
    CROSS JOIN LATERAL settlement_scope_keys(e.repository_id, e.user_id, e.labels) k
    CROSS JOIN (VALUES (1::smallint), (15::smallint)) AS g (grain)
    WHERE e.kind = 'spend' AND e.created_at >= now() - interval '35 days'
      AND (g.grain = 15 OR e.created_at >= now() - interval '8 days')
    GROUP BY 1, 2, 3, 4, 5
    HAVING sum(e.amount_usd) > 0`

  // The spends of a scope key in [first, until), as the counters hold them: the edges [first, a)
  // and [z, until) by the quarter hour (a rolling window's by the minute), the middle [a, z) by
  // 0022's UTC days (a rolling window's by the quarter hour); a span too short for a middle is
  // all edge. `grain` is each row's length in minutes.
  yield* sql`
    CREATE FUNCTION scope_spends(
      wallet_id uuid, scope text, scope_key text, rolling boolean, first timestamptz, until timestamptz
    ) RETURNS TABLE (at timestamptz, grain integer, spent_usd numeric) LANGUAGE sql STABLE AS $$
      WITH unit AS (
        SELECT CASE WHEN rolling THEN interval '15 minutes' ELSE interval '1 day' END AS middle,
          CASE WHEN rolling THEN 1 ELSE 15 END::smallint AS edge
      ), bounds AS (
        SELECT date_bin(middle, first + middle - interval '1 microsecond', '2000-01-01T00:00:00Z') AS m_from,
          date_bin(middle, until, '2000-01-01T00:00:00Z') AS m_to, edge
        FROM unit
      ), parts AS (
        SELECT CASE WHEN m_from < m_to THEN m_from ELSE until END AS a,
          CASE WHEN m_from < m_to THEN m_to ELSE until END AS z, edge
        FROM bounds
      )
      SELECT r.at, r.grain::integer, r.spent_usd FROM parts p, settlement_scope_recent r
      WHERE r.wallet_id = scope_spends.wallet_id AND r.scope = scope_spends.scope
        AND r.scope_key = scope_spends.scope_key AND r.grain = p.edge AND r.at >= first AND r.at < p.a
      UNION ALL
      SELECT r.at, 15, r.spent_usd FROM parts p, settlement_scope_recent r
      WHERE rolling AND r.wallet_id = scope_spends.wallet_id AND r.scope = scope_spends.scope
        AND r.scope_key = scope_spends.scope_key AND r.grain = 15 AND r.at >= p.a AND r.at < p.z
      UNION ALL
      SELECT t.day AT TIME ZONE 'UTC', 1440, t.spent_usd FROM parts p, settlement_scope_totals t
      WHERE NOT rolling AND t.wallet_id = scope_spends.wallet_id AND t.scope = scope_spends.scope
        AND t.scope_key = scope_spends.scope_key
        AND t.day >= (p.a AT TIME ZONE 'UTC')::date AND t.day < (p.z AT TIME ZONE 'UTC')::date
      UNION ALL
      SELECT r.at, r.grain::integer, r.spent_usd FROM parts p, settlement_scope_recent r
      WHERE r.wallet_id = scope_spends.wallet_id AND r.scope = scope_spends.scope
        AND r.scope_key = scope_spends.scope_key AND r.grain = p.edge AND r.at >= p.z AND r.at < until
        AND p.z > p.a
    $$`

  // A limit's use (D16, D19, D22). For a spend limit (`used_usd`; null for a concurrency limit):
  // the spends of its scope key in [first, until) (`scope_spends`; a rolling limit's window) plus
  // what its open sessions hold now (the wallet's reserved balance for the account); for a
  // session limit, the largest held + spent of the open sessions it governs. `open_sessions` for
  // a concurrency limit (null otherwise).
  yield* sql`
    CREATE FUNCTION limit_use(
      period text, scope text, scope_key text, wallet_id uuid, wallet_reserved numeric,
      first timestamptz, until timestamptz
    ) RETURNS TABLE (used_usd numeric, open_sessions integer) LANGUAGE sql STABLE AS $$
      SELECT
        CASE
          WHEN period = 'concurrent' THEN NULL
          WHEN wallet_id IS NULL THEN 0::numeric(30, 6)
          WHEN scope = 'session' THEN (
            SELECT coalesce(max(s.held_usd + s.spent_usd), 0) FROM settlement_sessions s
            WHERE s.wallet_id = limit_use.wallet_id AND s.state = 'open' AND s.max_usd IS NULL)::numeric(30, 6)
          ELSE (
            coalesce((SELECT sum(x.spent_usd)
              FROM scope_spends(wallet_id, scope, scope_key, period = 'rolling', first, until) x), 0)
            + CASE
              WHEN scope = 'account' THEN wallet_reserved
              ELSE coalesce((
                SELECT h.held_usd FROM settlement_scope_holds h
                WHERE h.wallet_id = limit_use.wallet_id AND h.scope = limit_use.scope
                  AND h.scope_key = limit_use.scope_key), 0)
              END)::numeric(30, 6)
        END,
        CASE
          WHEN period <> 'concurrent' THEN NULL
          ELSE coalesce((
            SELECT h.open_sessions FROM settlement_scope_holds h
            WHERE h.wallet_id = limit_use.wallet_id AND h.scope = limit_use.scope
              AND h.scope_key = limit_use.scope_key), 0)
        END
    $$`

  // The bounds a limit counts between at `at` (D22): its period in the account's zone, or a
  // rolling limit's window, the `window_minutes` minutes ending with `at`'s; null for session and
  // concurrent limits.
  yield* sql`
    CREATE FUNCTION limit_bounds(
      period text, window_minutes integer, timezone text, week_start text, carried jsonb, at timestamptz
    ) RETURNS TABLE (first timestamptz, until timestamptz) LANGUAGE sql STABLE AS $$
      SELECT date_trunc('minute', at) - make_interval(mins => window_minutes - 1), date_trunc('minute', at) + interval '1 minute'
      WHERE period = 'rolling'
      UNION ALL
      SELECT p.period_start, p.period_end FROM account_period(period, timezone, week_start, carried, at) p
      WHERE period IN ('hour', 'day', 'week', 'month')
    $$`

  yield* sql`
    ALTER TABLE spend_limits
      DROP CONSTRAINT spend_limits_scope_check,
      DROP CONSTRAINT spend_limits_period_check,
      DROP CONSTRAINT spend_limits_scope_id_check,
      DROP CONSTRAINT spend_limits_account_kind_account_id_scope_scope_id_period_key,
      ADD COLUMN window_minutes integer CHECK (window_minutes BETWEEN 5 AND 10080),
      ADD CONSTRAINT spend_limits_scope_check CHECK (scope IN (
        'account', 'repository', 'user', 'label', 'session', 'each_user', 'each_repository', 'each_label')),
      ADD CONSTRAINT spend_limits_period_check CHECK (
        period IN ('hour', 'day', 'week', 'month', 'rolling', 'session', 'concurrent')),
      ADD CONSTRAINT spend_limits_scope_id_check CHECK (
        (scope IN ('repository', 'user', 'label', 'each_label')) = (scope_id IS NOT NULL)),
      ADD CONSTRAINT spend_limits_window_check CHECK ((period = 'rolling') = (window_minutes IS NOT NULL)),
      ADD CONSTRAINT spend_limits_identity UNIQUE NULLS NOT DISTINCT (
        account_kind, account_id, scope, scope_id, period, window_minutes)`

  yield* sql`
    ALTER TABLE settlement_limit_announcements
      DROP CONSTRAINT settlement_limit_announcements_pkey,
      ALTER COLUMN period_start TYPE timestamptz USING period_start::timestamp AT TIME ZONE 'UTC',
      ADD COLUMN scope_key text NOT NULL DEFAULT '',
      ADD PRIMARY KEY (limit_id, scope_key, period_start, percent)`

  yield* sql`DROP FUNCTION spend_limit_use(text, text, text, uuid, numeric, date, date)`

  // The spend report's days in the account's zone: each running total also names the local day
  // it was spent on (the zone's date at the batch's time), null for the rows written before, whose
  // local day was their UTC day (every account was in UTC). The key leads with the local day, so
  // a report's window reads only its rows, as it read them by UTC day before.
  yield* sql`ALTER TABLE settlement_spend_totals ADD COLUMN local_day date`
  yield* sql`ALTER TABLE settlement_spend_totals DROP CONSTRAINT settlement_spend_totals_key`
  yield* sql`
    CREATE UNIQUE INDEX settlement_spend_totals_key ON settlement_spend_totals
      (wallet_id, (coalesce(local_day, day)), day, repository_id, user_id, model, labels) NULLS NOT DISTINCT`
  yield* sql`
    CREATE OR REPLACE VIEW settlement_spend_total_rows AS
      SELECT wallet_id, day, repository_id, user_id, spent_usd, unfunded_usd, sessions, model, labels,
        coalesce(local_day, day) AS local_day
      FROM settlement_spend_totals`
})
