/**
 * The settlement batch as one transition (D8, D16, D17, D19, D22; docs/architecture.md, "The settlement
 * transition"): the only file that holds a batch's SQL. Two statements, two round trips, whatever
 * rules are on: no BEGIN, no COMMIT, each statement is its own transaction.
 *
 * 1. `read` (no lock): for the batch's accounts, in one JSON answer,
 *    reads  organisations, users, memberships (the accounts and their kind), repositories (who
 *           owns an attributed repository or user), wallets (balances, sequence, `xmin`),
 *           settlement_records (the keys' first outcomes), settlement_sessions (the batch's
 *           sessions; for the expiry sweep, the holds past their time), spend_limits (an `each_`
 *           limit once per member the batch's sessions and reserves name, D22) with their use
 *           (`limit_use`, migration 0028, inlined: settlement_scope_totals, the period's UTC days
 *           of the limit's scope key, settlement_scope_recent, its quarter hours and minutes at
 *           the period's edges and a rolling window's, and settlement_scope_holds, what its open
 *           sessions hold and how many count as open) in the periods holding at the read's
 *           `now()` in the account's zone (account_period_settings, the settings' read model of
 *           account_settings), and the percentages those periods announced
 *           (settlement_limit_announcements), account_alerts (thresholds), and `now()`, the
 *           time the write stamps on every row and every bound (a period, a raise's `until`,
 *           a hold's expiry) is judged by;
 *    writes wallets (inserts the wallets its accounts lack, nothing else).
 * 2. `write`: what the service decided from that state,
 *    locks  wallets (FOR UPDATE, in the order of their ids, 2 s at most), then
 *           account_event_heads (in the order of the account ids, when there are events);
 *    writes wallets (balances, sequence; every wallet of the batch, so its `xmin` moves),
 *           ledger_entries, settlement_sessions, wallet_grants (D21: what the batch earmarked, drew,
 *           returned and ended), settlement_records, settlement_spend_totals,
 *           settlement_scope_recent (what the batch spent, by the minute and the quarter hour, per
 *           scope key, D22), settlement_limit_announcements, account_event_heads and account_events; the
 *           triggers of settlement_spend_totals and settlement_sessions (migration 0022) write
 *           settlement_scope_totals and settlement_scope_holds in the same statement, each
 *           wallet's counters in key order, under the wallet's lock;
 *    only for the wallets whose `xmin` is still the one `read` answered: a wallet written since
 *    (by another worker's batch or an API mutation) writes nothing of its own, and `write`
 *    answers which wallets were written; the service reads those that were not again.
 *
 * Every fact of an account's settlement state changes only with its wallet row (each batch
 * writes it, each API mutation too), so the wallet's `xmin` stands for all of them: a limit's use,
 * the sessions open under a concurrency limit, a key's record, a session, a period's
 * announcement: no two workers open the N+1st session under a limit of N. The rules are the
 * service's (Plan.ts, Limits.ts); this file only reads what they need and writes what they decided. Inputs and outputs are JSON texts:
 * one parameter per table, no array of arrays for `pg` to escape, and PostgreSQL's own JSON back,
 * parsed once.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountKind } from "../Domain/Account.js"
import type { Outcome } from "../Domain/SettlementSession.js"
import type { LimitPeriod, LimitScope } from "../Domain/SpendLimit.js"
import { PREPARED } from "../Sql.js"
import { orDefect } from "../Sql/Errors.js"
import type { ReachedLimit } from "./Jobs.js"

/** The lock wait a batch's write accepts (D6's 2 s), then it fails and its jobs are retried. */
const LOCK_TIMEOUT = "2s"

/**
 * What a batch asks for: its accounts, keys and sessions. The calendar periods a limit counts are
 * the read's own, those holding at its `now()` (UTC): the time every row it writes is stamped
 * with, and the one every bound is judged by (D19), whatever the worker's clock says.
 */
export interface StateRequest {
  readonly accounts: ReadonlyArray<string>
  readonly keys: ReadonlyArray<{ readonly account_id: string; readonly key: string }>
  readonly sessions: ReadonlyArray<{ readonly account_id: string; readonly session_id: string }>
  readonly repositories: ReadonlyArray<string>
  readonly users: ReadonlyArray<string>
  /**
   * The members the batch's reserves name, by the scope of their counters (`user`, `repository`,
   * `label` with `key=value`): whom each `each_` limit is read for (D22), beside the members of
   * the sessions the batch reads.
   */
  readonly members: ReadonlyArray<
    { readonly account_id: string; readonly scope: "user" | "repository" | "label"; readonly scope_key: string }
  >
  /** Accounts whose holds past their time the batch releases (the expiry sweep). */
  readonly expire: ReadonlyArray<string>
}

/** Amounts are the columns' text (six decimals); times ISO 8601 UTC to the microsecond. */
export interface StateWallet {
  readonly id: string
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly enforced: boolean
  readonly version: number
  readonly last_sequence: number
  readonly created_at: string
  readonly updated_at: string
  /** The row version this state was read from: the write's guard. */
  readonly xmin: string
}

export interface StateAccount {
  readonly id: string
  readonly kind: AccountKind
  /** The date in the account's zone at the read's `now()` (D22): the spend report's day of what the batch spends. */
  readonly local_day: string
  /** Null only when its first wallet was created by another writer during the read: read again. */
  readonly wallet: StateWallet | null
}

export interface StateRecord {
  readonly account_id: string
  readonly idempotency_key: string
  readonly kind: "reserve" | "spend" | "release" | "extend"
  readonly session_id: string
  readonly amount_usd: string | null
  readonly ttl_seconds: number | null
  readonly outcome: Outcome
  readonly entry_ids: ReadonlyArray<string>
  readonly unfunded_usd: string | null
  readonly expires_at: string | null
  /** As the job's result named it (Jobs.ts). */
  readonly limit_hit: ReachedLimit | null
  readonly cap_reached: boolean
  readonly max_reservable_usd: string | null
}

export interface StateSession {
  readonly account_id: string
  readonly session_id: string
  readonly task_id: string | null
  readonly state: "open" | "released" | "expired"
  readonly held_usd: string
  readonly spent_usd: string
  readonly unfunded_usd: string
  readonly expires_at: string
  readonly created_at: string
  readonly updated_at: string
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly max_usd: string | null
  /** Null when none. */
  readonly labels: Readonly<Record<string, string>> | null
  readonly warned_percent: number
  /** Its hold by grant (D21), amounts as text; null when all on the base. */
  readonly earmarks: ReadonlyArray<{ readonly grant_id: string; readonly amount_usd: string }> | null
  /** Read for the expiry sweep: its hold is past its time. */
  readonly expired: boolean
}

/** A grant that can still move (D21): live, or ended with earmarks still held. */
export interface StateGrant {
  readonly account_id: string
  readonly id: string
  readonly entry_id: string
  readonly amount_usd: string
  readonly drawn_usd: string
  readonly held_usd: string
  readonly ended_usd: string
  readonly priority: number
  readonly category: "paid" | "promotional"
  readonly expires_at: string | null
  readonly state: "live" | "used" | "expired" | "voided"
  readonly note: string | null
  readonly created_at: string
  readonly warned_days: number | null
}

/**
 * A saved limit with its use: amounts for a spend limit, open sessions for a concurrency limit
 * (null otherwise); an `each_` limit once per member of the batch (D22), `applies_to` naming it.
 */
export interface StateLimit {
  readonly account_id: string
  readonly id: string
  readonly scope: LimitScope
  readonly scope_id: string | null
  readonly applies_to: string | null
  readonly period: LimitPeriod
  readonly window_minutes: number | null
  readonly period_start: string | null
  readonly period_end: string | null
  /** A rolling limit's window spends and when each leaves it, soonest first; null for the others. */
  readonly leaving: ReadonlyArray<{ readonly at: string; readonly amount_usd: string }> | null
  readonly amount_usd: string | null
  readonly used_usd: string | null
  readonly raise_amount_usd: string | null
  readonly raise_until: string | null
  readonly warn_at_percent: ReadonlyArray<number>
  readonly max_open_sessions: number | null
  readonly open_sessions: number | null
  /** The percentages its current period has announced (100: `limit.reached`). */
  readonly announced: ReadonlyArray<number>
}

export interface BatchState {
  /** The read's `now()`: what the write stamps on every row it writes. */
  readonly time: string
  readonly accounts: ReadonlyArray<StateAccount>
  readonly owners: ReadonlyArray<
    { readonly owned: "repository" | "user"; readonly id: string; readonly account_id: string }
  >
  readonly records: ReadonlyArray<StateRecord>
  readonly sessions: ReadonlyArray<StateSession>
  readonly limits: ReadonlyArray<StateLimit>
  readonly thresholds: ReadonlyArray<{ readonly account_id: string; readonly thresholds: unknown }>
  readonly grants: ReadonlyArray<StateGrant>
}

/** A wallet as the batch leaves it, with the row version it was decided from. */
export interface WalletWrite {
  readonly id: string
  readonly xmin: string
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly enforced: boolean
  readonly version: number
  readonly last_sequence: number
  /** Money moved: its `updated_at` becomes the batch's time. */
  readonly moved: boolean
}

export interface EntryWrite {
  readonly id: string
  readonly wallet_id: string
  readonly sequence: number
  readonly kind: string
  readonly amount_usd: string
  readonly budget_after_usd: string
  readonly reserved_after_usd: string
  readonly spent_after_usd: string
  readonly available_after_usd: string
  readonly session_id: string | null
  readonly task_id: string | null
  readonly note: string | null
  readonly idempotency_key: string | null
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly model: string | null
  readonly labels: Readonly<Record<string, string>> | null
  /** What it moved of each grant (D21), as the entry's column stores it; null when none. */
  readonly grants: ReadonlyArray<unknown> | null
}

export interface SessionWrite {
  readonly wallet_id: string
  readonly session_id: string
  readonly task_id: string | null
  readonly held_usd: string
  readonly spent_usd: string
  readonly unfunded_usd: string
  readonly state: string
  readonly expires_at: string
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly max_usd: string | null
  readonly labels: Readonly<Record<string, string>> | null
  readonly warned_percent: number
  readonly earmarks: ReadonlyArray<{ readonly grant_id: string; readonly amount_usd: string }> | null
}

/** A grant as the batch leaves it (D21). */
export interface GrantWrite {
  readonly wallet_id: string
  readonly id: string
  readonly drawn_usd: string
  readonly held_usd: string
  readonly ended_usd: string
  readonly state: string
  readonly warned_days: number | null
  readonly next_due_at: string | null
}

export interface RecordWrite {
  readonly wallet_id: string
  readonly idempotency_key: string
  readonly kind: string
  readonly session_id: string
  readonly amount_usd: string | null
  readonly ttl_seconds: number | null
  readonly outcome: string
  readonly entry_ids: ReadonlyArray<string>
  readonly unfunded_usd: string | null
  readonly expires_at: string | null
  readonly limit_hit: StateRecord["limit_hit"]
  readonly cap_reached: boolean
  readonly max_reservable_usd: string | null
}

export interface TotalWrite {
  readonly wallet_id: string
  /** The account's local day at the batch's time (D22), the spend report's day. */
  readonly local_day: string
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly model: string | null
  readonly labels: Readonly<Record<string, string>> | null
  readonly spent_usd: string
  readonly unfunded_usd: string
  readonly sessions: number
}

export interface EventWrite {
  readonly wallet_id: string
  readonly account_kind: AccountKind
  readonly account_id: string
  readonly type: string
  /** The event's data as the catalog encoded it: kept as JSON text, byte for byte, keys in order. */
  readonly data: string
}

/** Everything a batch decided, by table; each row names its wallet, and is written only if that wallet is. */
export interface BatchWrite {
  /** The read's time, stamped on every row written. */
  readonly time: string
  readonly wallets: ReadonlyArray<WalletWrite>
  readonly entries: ReadonlyArray<EntryWrite>
  readonly sessions: ReadonlyArray<SessionWrite>
  readonly records: ReadonlyArray<RecordWrite>
  readonly totals: ReadonlyArray<TotalWrite>
  readonly announced: ReadonlyArray<
    {
      readonly wallet_id: string
      readonly limit_id: string
      /** The member an `each_` limit announced for (D22); '' for the others. */
      readonly scope_key: string
      readonly period_start: string
      readonly percent: number
    }
  >
  readonly events: ReadonlyArray<EventWrite>
  readonly grants: ReadonlyArray<GrantWrite>
}

export class SettlementTransition extends Effect.Service<SettlementTransition>()("Settlement/Transition", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** A time as the state answers it: ISO 8601 UTC, to the microsecond. */
    const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

    /**
     * Every lookup is an index probe per key: by `= ANY` of an array computed once, or a LATERAL
     * subquery per row. The planner cannot know how many keys a JSON parameter holds (it guesses
     * 100), and a join on that guess reads whole tables that a batch of ten keys does not need.
     */
    const readStatement = (request: StateRequest) =>
      sql<{ readonly state: string }>`${sql.literal(PREPARED)}
        WITH input AS (SELECT ${JSON.stringify(request)}::json AS r),
        ids AS MATERIALIZED (
          SELECT
            ARRAY(SELECT json_array_elements_text(r -> 'accounts')::uuid) AS accounts,
            ARRAY(SELECT json_array_elements_text(r -> 'repositories')::uuid) AS repositories,
            ARRAY(SELECT json_array_elements_text(r -> 'users')::uuid) AS users,
            ARRAY(SELECT json_array_elements_text(r -> 'expire')::uuid) AS expire
          FROM input
        ),
        found AS MATERIALIZED (
          SELECT o.id, 'client'::account_kind AS kind FROM organisations o
          WHERE o.id = ANY((SELECT accounts FROM ids)::uuid[])
          UNION ALL
          SELECT u.id, 'user'::account_kind FROM users u
          WHERE u.id = ANY((SELECT accounts FROM ids)::uuid[])
            AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id)
        ),
        created AS (
          INSERT INTO wallets (account_kind, account_id)
          SELECT f.kind, f.id FROM found f WHERE NOT EXISTS (SELECT 1 FROM wallets w WHERE w.account_id = f.id)
          ON CONFLICT (account_id) DO NOTHING
          RETURNING *, xmin
        ),
        wallet AS MATERIALIZED (
          SELECT w.*, w.xmin FROM wallets w WHERE w.account_id = ANY((SELECT accounts FROM ids)::uuid[])
          UNION ALL
          SELECT * FROM created
        ),
        sessions AS MATERIALIZED (
          SELECT w.account_id, s.*, false AS expired
          FROM json_to_recordset((SELECT r -> 'sessions' FROM input)) AS x (account_id uuid, session_id text)
          JOIN wallet w ON w.account_id = x.account_id,
          LATERAL (SELECT * FROM settlement_sessions s WHERE s.wallet_id = w.id AND s.session_id = x.session_id) s
          UNION ALL
          SELECT w.account_id, s.*, true
          FROM wallet w,
          LATERAL (SELECT * FROM settlement_sessions s
            WHERE s.wallet_id = w.id AND s.state = 'open' AND s.expires_at <= now()) s
          WHERE w.account_id = ANY((SELECT expire FROM ids)::uuid[])
        ),
        members AS MATERIALIZED (
          SELECT DISTINCT m.account_id, m.scope, m.scope_key FROM (
            SELECT s.account_id, 'user' AS scope, s.user_id::text AS scope_key FROM sessions s WHERE s.user_id IS NOT NULL
            UNION ALL
            SELECT s.account_id, 'repository', s.repository_id::text FROM sessions s WHERE s.repository_id IS NOT NULL
            UNION ALL
            SELECT s.account_id, 'label', l.key || '=' || l.value FROM sessions s, jsonb_each_text(s.labels) l
            UNION ALL
            SELECT x.account_id, x.scope, x.scope_key
            FROM json_to_recordset((SELECT r -> 'members' FROM input)) AS x (account_id uuid, scope text, scope_key text)
          ) m
        ),
        limits AS (
          SELECT f.id AS account_id, l.id, l.scope, l.scope_id, l.period, l.window_minutes, l.amount_usd,
            l.max_open_sessions, l.warn_at_percent, l.raise_amount_usd, l.raise_until, m.scope_key AS applies_to,
            coalesce(m.scope_key, l.scope_id, '') AS counter_key, c.counter_scope,
            coalesce(z.timezone, 'UTC') AS timezone, coalesce(z.week_start, 'monday') AS week_start,
            coalesce(z.carried, '{}') AS carried
          FROM found f
          CROSS JOIN LATERAL (SELECT * FROM spend_limits l WHERE l.account_kind = f.kind AND l.account_id = f.id) l
          CROSS JOIN LATERAL (SELECT CASE l.scope WHEN 'each_user' THEN 'user' WHEN 'each_repository' THEN 'repository'
            WHEN 'each_label' THEN 'label' ELSE l.scope END AS counter_scope) c
          LEFT JOIN account_period_settings z ON z.account_kind = f.kind AND z.account_id = f.id
          LEFT JOIN LATERAL (
            SELECT b.scope_key FROM members b
            WHERE b.account_id = f.id AND l.scope LIKE 'each%' AND b.scope = c.counter_scope
              AND (l.scope <> 'each_label' OR left(b.scope_key, length(l.scope_id) + 1) = l.scope_id || '=')
          ) m ON true
          WHERE l.scope NOT LIKE 'each%' OR m.scope_key IS NOT NULL
        )
        SELECT json_build_object(
          'time', ${sql.literal(iso("now()"))},
          'accounts', (SELECT coalesce(json_agg(json_build_object(
              'id', f.id, 'kind', f.kind,
              'local_day', (SELECT to_char(now() AT TIME ZONE coalesce(
                (SELECT z.timezone FROM account_period_settings z WHERE z.account_kind = f.kind AND z.account_id = f.id),
                'UTC'), 'YYYY-MM-DD')),
              'wallet', (SELECT json_build_object(
                'id', w.id, 'budget_usd', w.budget_usd::text, 'reserved_usd', w.reserved_usd::text,
                'spent_usd', w.spent_usd::text, 'enforced', w.enforced, 'version', w.version,
                'last_sequence', w.last_sequence, 'created_at', ${sql.literal(iso("w.created_at"))},
                'updated_at', ${sql.literal(iso("w.updated_at"))}, 'xmin', w.xmin::text)
                FROM wallet w WHERE w.account_id = f.id LIMIT 1))), '[]') FROM found f),
          'owners', (SELECT coalesce(json_agg(o), '[]') FROM (
              SELECT 'repository' AS owned, p.id, p.account_id FROM repositories p
              WHERE p.id = ANY((SELECT repositories FROM ids)::uuid[])
              UNION ALL
              SELECT 'user', u.id, coalesce(m.organisation_id, u.id)
              FROM users u LEFT JOIN memberships m ON m.user_id = u.id
              WHERE u.id = ANY((SELECT users FROM ids)::uuid[])) o),
          'records', (SELECT coalesce(json_agg(json_build_object(
              'account_id', k.account_id, 'idempotency_key', c.idempotency_key, 'kind', c.kind,
              'session_id', c.session_id, 'amount_usd', c.amount_usd::text, 'ttl_seconds', c.ttl_seconds,
              'outcome', c.outcome, 'entry_ids', c.entry_ids, 'unfunded_usd', c.unfunded_usd::text,
              'expires_at', ${sql.literal(iso("c.expires_at"))}, 'limit_hit', c.limit_hit,
              'cap_reached', c.cap_reached, 'max_reservable_usd', c.max_reservable_usd::text)), '[]')
              FROM json_to_recordset((SELECT r -> 'keys' FROM input)) AS k (account_id uuid, key text)
              JOIN wallet w ON w.account_id = k.account_id,
              LATERAL (SELECT * FROM settlement_records c WHERE c.wallet_id = w.id AND c.idempotency_key = k.key) c),
          'sessions', (SELECT coalesce(json_agg(json_build_object(
              'account_id', s.account_id, 'session_id', s.session_id, 'task_id', s.task_id, 'state', s.state,
              'held_usd', s.held_usd::text, 'spent_usd', s.spent_usd::text, 'unfunded_usd', s.unfunded_usd::text,
              'expires_at', ${sql.literal(iso("s.expires_at"))}, 'created_at', ${sql.literal(iso("s.created_at"))},
              'updated_at', ${sql.literal(iso("s.updated_at"))}, 'repository_id', s.repository_id,
              'user_id', s.user_id, 'max_usd', s.max_usd::text, 'labels', s.labels,
              'warned_percent', s.warned_percent, 'earmarks', s.earmarks, 'expired', s.expired)), '[]') FROM sessions s),
          'limits', (SELECT coalesce(json_agg(json_build_object(
              'account_id', l.account_id, 'id', l.id, 'scope', l.scope, 'scope_id', l.scope_id,
              'applies_to', l.applies_to, 'period', l.period, 'window_minutes', l.window_minutes,
              'period_start', CASE WHEN l.period = 'rolling' THEN NULL ELSE ${sql.literal(iso("p.first"))} END,
              'period_end', CASE WHEN l.period = 'rolling' THEN NULL ELSE ${sql.literal(iso("p.until"))} END,
              'amount_usd', l.amount_usd::text, 'used_usd', u.used_usd::text,
              'raise_amount_usd', l.raise_amount_usd::text, 'raise_until', ${sql.literal(iso("l.raise_until"))},
              'warn_at_percent', l.warn_at_percent, 'max_open_sessions', l.max_open_sessions,
              'open_sessions', u.open_sessions,
              'announced', ARRAY(SELECT n.percent FROM settlement_limit_announcements n
                WHERE n.limit_id = l.id AND n.scope_key = coalesce(l.applies_to, '') AND n.period_start = p.first),
              'leaving', CASE WHEN l.period = 'rolling' THEN (
                SELECT json_agg(json_build_object(
                  'at', ${sql.literal(iso("(x.at + make_interval(mins => x.grain - 1 + l.window_minutes))"))},
                  'amount_usd', x.spent_usd::text) ORDER BY x.at)
                FROM scope_spends(w.id, l.counter_scope, l.counter_key, true, p.first, p.until) x) END
              ) ORDER BY l.id, l.applies_to), '[]')
              FROM limits l
              LEFT JOIN wallet w ON w.account_id = l.account_id
              LEFT JOIN LATERAL limit_bounds(l.period, l.window_minutes, l.timezone, l.week_start, l.carried, now()) p
                ON true
              CROSS JOIN LATERAL limit_use(l.period, l.counter_scope, l.counter_key, w.id, w.reserved_usd, p.first,
                p.until) u),
          'thresholds', (SELECT coalesce(json_agg(json_build_object('account_id', a.account_id, 'thresholds', a.thresholds)), '[]')
              FROM found f
              CROSS JOIN LATERAL (SELECT * FROM account_alerts a WHERE a.account_kind = f.kind AND a.account_id = f.id) a),
          'grants', (SELECT coalesce(json_agg(json_build_object(
              'account_id', w.account_id, 'id', g.id, 'entry_id', g.entry_id, 'amount_usd', g.amount_usd::text,
              'drawn_usd', g.drawn_usd::text, 'held_usd', g.held_usd::text, 'ended_usd', g.ended_usd::text,
              'priority', g.priority, 'category', g.category, 'expires_at', ${sql.literal(iso("g.expires_at"))},
              'state', g.state, 'note', g.note, 'created_at', ${sql.literal(iso("g.created_at"))},
              'warned_days', g.warned_days)), '[]')
              FROM wallet w,
              LATERAL (SELECT * FROM wallet_grants g
                WHERE g.wallet_id = w.id AND g.moving) g)
        )::text AS state`

    const read = (request: StateRequest) =>
      Effect.map(readStatement(request), ([row]): BatchState => JSON.parse(row?.state ?? "null") as BatchState)

    /**
     * Each part joins `written`, the wallets whose row version is still the one read: the rows of a
     * wallet written since are not written. Every part is a CTE of the one statement; they share
     * its snapshot, and none reads what another writes but `written`'s answer.
     */
    const writeStatement = (batch: BatchWrite) =>
      sql<{ readonly written: string }>`${sql.literal(PREPARED)}
        WITH wallet_input AS (
          SELECT * FROM json_to_recordset(${JSON.stringify(batch.wallets)}::json) AS i (
            id uuid, xmin text, budget_usd numeric, reserved_usd numeric, spent_usd numeric, enforced boolean,
            version integer, last_sequence bigint, moved boolean)
        ),
        locked AS MATERIALIZED (
          SELECT w.id FROM wallet_input i JOIN wallets w ON w.id = i.id
          WHERE (SELECT set_config('lock_timeout', ${LOCK_TIMEOUT}, true)) IS NOT NULL
          ORDER BY w.id
          FOR UPDATE OF w
        ),
        written AS (
          UPDATE wallets w SET budget_usd = i.budget_usd, reserved_usd = i.reserved_usd, spent_usd = i.spent_usd,
            enforced = i.enforced, version = i.version, last_sequence = i.last_sequence,
            updated_at = CASE WHEN i.moved THEN ${batch.time}::timestamptz ELSE w.updated_at END
          FROM locked l JOIN wallet_input i ON i.id = l.id
          WHERE w.id = l.id AND w.xmin::text = i.xmin
          RETURNING w.id, w.account_kind, w.account_id
        ),
        entries AS (
          INSERT INTO ledger_entries (id, wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
            spent_after_usd, available_after_usd, session_id, task_id, note, idempotency_key, repository_id, user_id,
            model, labels, grants, created_at)
          SELECT e.id, e.wallet_id, e.sequence, e.kind::ledger_entry_kind, e.amount_usd, e.budget_after_usd,
            e.reserved_after_usd, e.spent_after_usd, e.available_after_usd, e.session_id, e.task_id, e.note,
            e.idempotency_key, e.repository_id, e.user_id, e.model, e.labels, e.grants, ${batch.time}::timestamptz
          FROM json_to_recordset(${JSON.stringify(batch.entries)}::json) AS e (
            id uuid, wallet_id uuid, sequence bigint, kind text, amount_usd numeric, budget_after_usd numeric,
            reserved_after_usd numeric, spent_after_usd numeric, available_after_usd numeric, session_id text,
            task_id text, note text, idempotency_key text, repository_id uuid, user_id uuid, model text, labels jsonb,
            grants jsonb)
          JOIN written ON written.id = e.wallet_id
        ),
        sessions AS (
          INSERT INTO settlement_sessions (wallet_id, session_id, task_id, held_usd, spent_usd, unfunded_usd, state,
            expires_at, repository_id, user_id, max_usd, labels, warned_percent, earmarks, created_at, updated_at)
          SELECT s.wallet_id, s.session_id, s.task_id, s.held_usd, s.spent_usd, s.unfunded_usd,
            s.state::settlement_session_state, s.expires_at, s.repository_id, s.user_id, s.max_usd, s.labels,
            s.warned_percent, s.earmarks, ${batch.time}::timestamptz, ${batch.time}::timestamptz
          FROM json_to_recordset(${JSON.stringify(batch.sessions)}::json) AS s (
            wallet_id uuid, session_id text, task_id text, held_usd numeric, spent_usd numeric, unfunded_usd numeric,
            state text, expires_at timestamptz, repository_id uuid, user_id uuid, max_usd numeric, labels jsonb,
            warned_percent smallint, earmarks jsonb)
          JOIN written ON written.id = s.wallet_id
          ON CONFLICT (wallet_id, session_id) DO UPDATE SET
            task_id = EXCLUDED.task_id, held_usd = EXCLUDED.held_usd, spent_usd = EXCLUDED.spent_usd,
            unfunded_usd = EXCLUDED.unfunded_usd, state = EXCLUDED.state, expires_at = EXCLUDED.expires_at,
            repository_id = EXCLUDED.repository_id, user_id = EXCLUDED.user_id, max_usd = EXCLUDED.max_usd,
            labels = EXCLUDED.labels, warned_percent = EXCLUDED.warned_percent, earmarks = EXCLUDED.earmarks,
            updated_at = EXCLUDED.updated_at
        ),
        grants AS (
          UPDATE wallet_grants g SET drawn_usd = u.drawn_usd, held_usd = u.held_usd, ended_usd = u.ended_usd,
            state = u.state::grant_state, warned_days = u.warned_days, next_due_at = u.next_due_at,
            moving = (u.state = 'live' OR u.held_usd > 0),
            ended_at = CASE WHEN g.state = 'live' AND u.state <> 'live' THEN ${batch.time}::timestamptz
              ELSE g.ended_at END
          FROM json_to_recordset(${JSON.stringify(batch.grants)}::json) AS u (
            wallet_id uuid, id uuid, drawn_usd numeric, held_usd numeric, ended_usd numeric, state text,
            warned_days smallint, next_due_at timestamptz)
          JOIN written ON written.id = u.wallet_id
          WHERE g.id = u.id
        ),
        records AS (
          INSERT INTO settlement_records (wallet_id, idempotency_key, kind, session_id, amount_usd, ttl_seconds, outcome,
            entry_ids, unfunded_usd, expires_at, limit_hit, cap_reached, max_reservable_usd)
          SELECT r.wallet_id, r.idempotency_key, r.kind, r.session_id, r.amount_usd, r.ttl_seconds,
            r.outcome::settlement_outcome, ARRAY(SELECT json_array_elements_text(r.entry_ids))::uuid[], r.unfunded_usd,
            r.expires_at, r.limit_hit, r.cap_reached, r.max_reservable_usd
          FROM json_to_recordset(${JSON.stringify(batch.records)}::json) AS r (
            wallet_id uuid, idempotency_key text, kind text, session_id text, amount_usd numeric, ttl_seconds integer,
            outcome text, entry_ids json, unfunded_usd numeric, expires_at timestamptz, limit_hit jsonb,
            cap_reached boolean, max_reservable_usd numeric)
          JOIN written ON written.id = r.wallet_id
        ),
        totals AS (
          INSERT INTO settlement_spend_totals AS t (wallet_id, day, local_day, repository_id, user_id, model, labels,
            spent_usd, unfunded_usd, sessions)
          SELECT s.wallet_id, (${batch.time}::timestamptz AT TIME ZONE 'UTC')::date, s.local_day, s.repository_id,
            s.user_id, s.model, s.labels, s.spent_usd, s.unfunded_usd, s.sessions
          FROM json_to_recordset(${JSON.stringify(batch.totals)}::json) AS s (
            wallet_id uuid, local_day date, repository_id uuid, user_id uuid, model text, labels jsonb,
            spent_usd numeric, unfunded_usd numeric, sessions integer)
          JOIN written ON written.id = s.wallet_id
          ON CONFLICT (wallet_id, (coalesce(local_day, day)), day, repository_id, user_id, model, labels) DO UPDATE SET
            spent_usd = t.spent_usd + EXCLUDED.spent_usd, unfunded_usd = t.unfunded_usd + EXCLUDED.unfunded_usd,
            sessions = t.sessions + EXCLUDED.sessions
        ),
        recent AS (
          INSERT INTO settlement_scope_recent AS c (wallet_id, scope, scope_key, grain, at, spent_usd)
          SELECT s.wallet_id, k.scope, k.scope_key, g.grain,
            date_bin(make_interval(mins => g.grain), ${batch.time}::timestamptz, '2000-01-01T00:00:00Z'),
            sum(s.spent_usd)
          FROM json_to_recordset(${JSON.stringify(batch.totals)}::json) AS s (
            wallet_id uuid, repository_id uuid, user_id uuid, labels jsonb, spent_usd numeric)
          JOIN written ON written.id = s.wallet_id
          CROSS JOIN LATERAL settlement_scope_keys(s.repository_id, s.user_id, s.labels) k
          CROSS JOIN (VALUES (1::smallint), (15::smallint)) AS g (grain)
          GROUP BY 1, 2, 3, 4, 5
          HAVING sum(s.spent_usd) > 0
          ORDER BY 1, 2, 3, 4, 5
          ON CONFLICT (wallet_id, scope, scope_key, grain, at) DO UPDATE SET spent_usd = c.spent_usd + EXCLUDED.spent_usd
        ),
        announced AS (
          INSERT INTO settlement_limit_announcements (limit_id, scope_key, period_start, percent)
          SELECT a.limit_id, a.scope_key, a.period_start, a.percent
          FROM json_to_recordset(${JSON.stringify(batch.announced)}::json) AS a (
            wallet_id uuid, limit_id uuid, scope_key text, period_start timestamptz, percent smallint)
          JOIN written ON written.id = a.wallet_id
          ON CONFLICT DO NOTHING
        ),
        events_input AS (
          SELECT (e ->> 'account_kind')::account_kind AS account_kind, (e ->> 'account_id')::uuid AS account_id,
            e ->> 'type' AS type, e ->> 'data' AS data, x.n
          FROM json_array_elements(${JSON.stringify(batch.events)}::json) WITH ORDINALITY AS x (e, n)
          JOIN written ON written.id = (e ->> 'wallet_id')::uuid
        ),
        events_counts AS (
          SELECT account_kind, account_id, count(*) AS added FROM events_input GROUP BY account_kind, account_id
        ),
        events_heads AS (
          INSERT INTO account_event_heads (account_kind, account_id, last_position)
          SELECT account_kind, account_id, added FROM events_counts ORDER BY account_id
          ON CONFLICT (account_kind, account_id)
            DO UPDATE SET last_position = account_event_heads.last_position + EXCLUDED.last_position
          RETURNING account_kind, account_id, last_position
        ),
        events_added AS (
          INSERT INTO account_events (account_kind, account_id, position, type, data, created_at)
          SELECT i.account_kind, i.account_id,
            h.last_position - c.added + row_number() OVER (PARTITION BY i.account_kind, i.account_id ORDER BY i.n),
            i.type, i.data::json, ${batch.time}::timestamptz
          FROM events_input i
            JOIN events_counts c USING (account_kind, account_id)
            JOIN events_heads h USING (account_kind, account_id)
          ORDER BY i.n
        )
        SELECT coalesce(json_agg(id), '[]')::text AS written FROM written`

    /** Writes the batch; answers the ids of the wallets written (the others changed since the read). */
    const write = (batch: BatchWrite) =>
      Effect.map(
        writeStatement(batch),
        ([row]): ReadonlySet<string> => new Set(JSON.parse(row?.written ?? "[]") as ReadonlyArray<string>)
      )

    return { read: orDefect(read), write: orDefect(write) } as const
  })
}) {}
