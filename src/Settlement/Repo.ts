import { SqlClient, SqlSchema, type Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import * as Money from "../Domain/Money.js"
import {
  type LimitHit,
  Outcome,
  type OutcomeToStore,
  type SessionState,
  type StoredOutcome
} from "../Domain/SettlementSession.js"
import { LimitPeriod, LimitScope } from "../Domain/SpendLimit.js"
import type { EmbeddedRead } from "../Sql/Embedded.js"
import { orDefect } from "../Sql/Errors.js"
import type { SpendTotal } from "./Plan.js"
import { SESSION_COLUMNS, SessionRow, sessionStateOf } from "./SessionsRepo.js"

/** A `limit_reached` outcome's limit as its record keeps it (jsonb, amounts as D6 strings). */
const LimitHitJson = Schema.Struct({
  id: Schema.NullOr(Schema.String),
  scope: LimitScope,
  scope_id: Schema.NullOr(Schema.String),
  period: LimitPeriod,
  amount_usd: Money.Usd,
  used_usd: Money.Usd
})

export const RecordRow = Schema.Struct({
  idempotency_key: Schema.String,
  /**
   * The job the key was first used for (D8): its kind, session, amount (none for a release, or a
   * record made before amounts were kept) and an extend's hold time (none before it was kept).
   */
  kind: Schema.Literal("reserve", "spend", "release", "extend"),
  session_id: Schema.String,
  amount_usd: Schema.NullOr(Money.Usd),
  ttl_seconds: Schema.NullOr(Schema.Int),
  outcome: Outcome,
  entry_ids: Schema.Array(Schema.String),
  unfunded_usd: Schema.NullOr(Money.Usd),
  expires_at: Schema.NullOr(Schema.DateFromSelf),
  /** What a duplicate answers again (D16): a `limit_reached` reserve's limit, a spend's `cap_reached`. */
  limit_hit: Schema.NullOr(LimitHitJson),
  cap_reached: Schema.Boolean
})
export type RecordRow = typeof RecordRow.Type

/** A session as a batch leaves it, with its wallet. */
export type WalletSession = SessionState & { readonly wallet_id: string }

/** A key's first outcome to record, with its wallet. */
export type NewRecord = OutcomeToStore & { readonly wallet_id: string }

/** What a batch's spends add to one wallet's running totals of today, by attribution (D16). */
export type WalletSpendTotal = SpendTotal & { readonly wallet_id: string }

const limitJson = (limit: LimitHit): typeof LimitHitJson.Encoded => ({
  id: limit.id,
  scope: limit.scope,
  scope_id: limit.scope_id,
  period: limit.period,
  amount_usd: Money.format(limit.amount_usd),
  used_usd: Money.format(limit.used_usd)
})

/** A record as the planner reads it. */
const storedOutcomeOf = (row: RecordRow): StoredOutcome => ({
  job: { kind: row.kind, session_id: row.session_id, amount_usd: row.amount_usd, ttl_seconds: row.ttl_seconds },
  outcome: row.outcome,
  entry_ids: row.entry_ids,
  unfunded_usd: row.unfunded_usd,
  expires_at: row.expires_at,
  limit: row.limit_hit,
  cap_reached: row.cap_reached
})

/** A row of `findBatchState`: a key's first outcome, a session or an embedded read's rows, told apart by `row_kind`. */
const BatchStateRow = Schema.Union(
  Schema.Struct({ row_kind: Schema.Literal("record"), wallet_id: Schema.String, ...RecordRow.fields }),
  Schema.Struct({ row_kind: Schema.Literal("session"), wallet_id: Schema.String, ...SessionRow.fields }),
  Schema.Struct({ row_kind: Schema.Literal("embedded"), embedded: Schema.Int, rows: Schema.Unknown })
)

/** The keys and the sessions a batch reads, by wallet. */
interface BatchStateRequest {
  readonly keys: ReadonlyArray<{ readonly wallet_id: string; readonly idempotency_key: string }>
  readonly sessions: ReadonlyArray<{ readonly wallet_id: string; readonly session_id: string }>
}

/** What a batch reads: each of its known keys' first outcome and each of its known sessions, by wallet. */
export type BatchState =
  | {
    readonly _tag: "Record"
    readonly wallet_id: string
    readonly idempotency_key: string
    readonly first: StoredOutcome
  }
  | {
    readonly _tag: "Session"
    readonly wallet_id: string
    readonly session: SessionState
    /** When its first reserve's transaction wrote it: what the sessions view shows as opened (D12). */
    readonly created_at: Date
  }

/** The limits whose `limit.reached` event a batch writes (D17), each with its period's first UTC day. */
export type AnnouncedLimits = ReadonlyArray<{ readonly limit_id: string; readonly period_start: string }>

/**
 * A batch's write: what it decided (sessions, records, running totals, limits announced), and the
 * writes of the same transaction that other features own, embedded in the one statement: its
 * ledger entries (with the count of entries they add) and its events.
 */
export interface BatchWrite {
  readonly sessions: ReadonlyArray<WalletSession>
  readonly records: ReadonlyArray<NewRecord>
  readonly totals: ReadonlyArray<WalletSpendTotal>
  readonly announced: AnnouncedLimits
  readonly ledger: { readonly write: Statement.Fragment | undefined; readonly added: Statement.Fragment }
  readonly events: Statement.Fragment | undefined
}

const ExpiredSession = Schema.Struct({
  wallet_id: Schema.String,
  account_kind: Schema.Literal("client", "user"),
  account_id: Schema.String
})

/**
 * Sessions and the first outcome of every settlement key (D8): SQL only. Every
 * query of a batch takes arrays, so a batch of any size costs the same number
 * of statements: one to read, one to write.
 */
export class SettlementRepo extends Effect.Service<SettlementRepo>()("Settlement/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * What a batch needs to decide, in one statement for all its wallets: the
     * first outcomes of its keys and the state of its sessions, and the reads of
     * other repositories it carries (`embedded`, each aggregated as one JSON
     * array on a row of its own). Read after the wallets' row locks are taken,
     * which serialises every writer of them.
     */
    const batchState = (
      { keys, sessions }: BatchStateRequest,
      embedded: ReadonlyArray<Statement.Fragment>
    ) => {
      const keyWallets = keys.map((k) => k.wallet_id)
      const keyNames = keys.map((k) => k.idempotency_key)
      const sessionWallets = sessions.map((k) => k.wallet_id)
      const sessionIds = sessions.map((k) => k.session_id)
      return sql`
          SELECT 'record' AS row_kind, wallet_id, idempotency_key, kind, amount_usd, ttl_seconds,
                 outcome::text AS outcome, entry_ids::text[] AS entry_ids, unfunded_usd, expires_at, session_id,
                 limit_hit, cap_reached,
                 NULL::text AS task_id, NULL::numeric AS held_usd, NULL::numeric AS spent_usd, NULL::text AS state,
                 NULL::timestamptz AS created_at, NULL::timestamptz AS updated_at, NULL::uuid AS repository_id,
                 NULL::uuid AS user_id, NULL::numeric AS max_usd, NULL::integer AS embedded, NULL::json AS rows
          FROM settlement_records
          WHERE (wallet_id, idempotency_key) IN (SELECT * FROM unnest(${keyWallets}::uuid[], ${keyNames}::text[]))
          UNION ALL
          SELECT 'session', wallet_id, NULL, NULL, NULL, NULL, NULL, NULL, unfunded_usd, expires_at, session_id,
                 NULL, NULL, task_id, held_usd, spent_usd, state::text, created_at, updated_at, repository_id,
                 user_id, max_usd, NULL, NULL
          FROM settlement_sessions
          WHERE (wallet_id, session_id) IN (SELECT * FROM unnest(${sessionWallets}::uuid[], ${sessionIds}::text[]))
          ${
        sql.join(" ", false, "")(embedded.map((select, index) =>
          sql`UNION ALL
          SELECT 'embedded', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                 NULL, NULL, NULL, NULL, NULL, NULL, ${index}, (SELECT coalesce(json_agg(q), '[]') FROM (${select}) q)`
        ))
      }`
    }

    const findBatchState = (request: BatchStateRequest, embedded: ReadonlyArray<Statement.Fragment>) =>
      Effect.flatMap(batchState(request, embedded), Schema.decodeUnknown(Schema.Array(BatchStateRow)))

    const upsertSessionsFrom = (sessions: ReadonlyArray<WalletSession>) => {
      const column = <A>(f: (session: WalletSession) => A) => sessions.map(f)
      return sql`
        INSERT INTO settlement_sessions
          (wallet_id, session_id, task_id, held_usd, spent_usd, unfunded_usd, state, expires_at, repository_id,
           user_id, max_usd)
        SELECT s.wallet_id, s.session_id, s.task_id, s.held, s.spent, s.unfunded, s.state::settlement_session_state,
               s.expires_at, s.repository_id, s.user_id, s.max_usd
        FROM unnest(
          ${column((s) => s.wallet_id)}::uuid[], ${column((s) => s.session_id)}::text[],
          ${column((s) => s.task_id)}::text[], ${column((s) => Money.format(s.held))}::numeric[],
          ${column((s) => Money.format(s.spent))}::numeric[], ${column((s) => Money.format(s.unfunded))}::numeric[],
          ${column((s) => s.state)}::text[], ${column((s) => s.expires_at.toISOString())}::timestamptz[],
          ${column((s) => s.repository_id)}::uuid[], ${column((s) => s.user_id)}::uuid[],
          ${column((s) => s.max_usd === null ? null : Money.format(s.max_usd))}::numeric[]
        ) AS s (wallet_id, session_id, task_id, held, spent, unfunded, state, expires_at, repository_id, user_id,
          max_usd)
        ON CONFLICT (wallet_id, session_id) DO UPDATE SET
          task_id = EXCLUDED.task_id, held_usd = EXCLUDED.held_usd, spent_usd = EXCLUDED.spent_usd,
          unfunded_usd = EXCLUDED.unfunded_usd, state = EXCLUDED.state, expires_at = EXCLUDED.expires_at,
          repository_id = EXCLUDED.repository_id, user_id = EXCLUDED.user_id, max_usd = EXCLUDED.max_usd,
          updated_at = now()`
    }

    /**
     * The spend report's running totals (D16): what the batch's spends add to each wallet's row of
     * today (UTC) per attribution. Today is the transaction's: the day of its entries' `created_at`.
     */
    const addSpendTotals = (totals: ReadonlyArray<WalletSpendTotal>) => {
      const column = <A>(f: (total: WalletSpendTotal) => A) => totals.map(f)
      return sql`
        INSERT INTO settlement_spend_totals AS t (wallet_id, day, repository_id, user_id, spent_usd, unfunded_usd, sessions)
        SELECT s.wallet_id, (now() AT TIME ZONE 'UTC')::date, s.repository_id, s.user_id, s.spent, s.unfunded, s.sessions
        FROM unnest(
          ${column((t) => t.wallet_id)}::uuid[], ${column((t) => t.repository_id)}::uuid[],
          ${column((t) => t.user_id)}::uuid[], ${column((t) => Money.format(t.spent))}::numeric[],
          ${column((t) => Money.format(t.unfunded))}::numeric[], ${column((t) => t.sessions)}::integer[]
        ) AS s (wallet_id, repository_id, user_id, spent, unfunded, sessions)
        ON CONFLICT ON CONSTRAINT settlement_spend_totals_key DO UPDATE SET
          spent_usd = t.spent_usd + EXCLUDED.spent_usd, unfunded_usd = t.unfunded_usd + EXCLUDED.unfunded_usd,
          sessions = t.sessions + EXCLUDED.sessions`
    }

    /**
     * A batch's outcome in one statement: its ledger entries and wallets, the sessions it changed,
     * what its spends add to the running totals, a record per decided key, the limits whose
     * `limit.reached` event it writes, and its events (D17). Answers how many ledger entries it
     * added, for the ledger to confirm. Every part is a CTE of the one statement: they share its
     * snapshot and none reads what another writes, so their order does not matter.
     */
    const saveBatch = (batch: BatchWrite): Effect.Effect<number, SqlError> => {
      const { announced, records, sessions, totals } = batch
      if (
        sessions.length + records.length + totals.length + announced.length === 0 && batch.ledger.write === undefined &&
        batch.events === undefined
      ) return Effect.succeed(0)
      const column = <A>(f: (record: NewRecord) => A) => records.map(f)
      const amount = (value: Money.Decimal | null) => value === null ? null : Money.format(value)
      const embedded = [batch.ledger.write, batch.events].flatMap((ctes) => ctes === undefined ? [] : [sql`${ctes},`])
      return sql<{ readonly added: number }>`
        WITH ${sql.join(" ", false, "")(embedded)}
        sessions AS (${upsertSessionsFrom(sessions)}), totals AS (${addSpendTotals(totals)}),
        announced AS (
          INSERT INTO settlement_limit_announcements (limit_id, period_start)
          SELECT * FROM unnest(${announced.map((a) => a.limit_id)}::uuid[], ${
        announced.map((a) => a.period_start)
      }::date[])
          ON CONFLICT DO NOTHING
        ), records AS (
        INSERT INTO settlement_records
          (wallet_id, idempotency_key, kind, session_id, amount_usd, ttl_seconds, outcome, entry_ids, unfunded_usd,
           expires_at, limit_hit, cap_reached)
        SELECT r.wallet_id, r.idempotency_key, r.kind, r.session_id, r.amount_usd, r.ttl_seconds,
               r.outcome::settlement_outcome, string_to_array(r.entry_ids, ',')::uuid[], r.unfunded_usd, r.expires_at,
               r.limit_hit::jsonb, r.cap_reached
        FROM unnest(
          ${column((r) => r.wallet_id)}::uuid[], ${column((r) => r.idempotency_key)}::text[],
          ${column((r) => r.job.kind)}::text[], ${column((r) => r.job.session_id)}::text[],
          ${column((r) => amount(r.job.amount_usd))}::numeric[], ${column((r) => r.job.ttl_seconds)}::integer[],
          ${column((r) => r.outcome)}::text[], ${column((r) => r.entry_ids.join(","))}::text[],
          ${column((r) => amount(r.unfunded_usd))}::numeric[],
          ${column((r) => r.expires_at?.toISOString() ?? null)}::timestamptz[],
          ${column((r) => r.limit === null ? null : JSON.stringify(limitJson(r.limit)))}::text[],
          ${column((r) => r.cap_reached)}::boolean[]
        ) AS r (wallet_id, idempotency_key, kind, session_id, amount_usd, ttl_seconds, outcome, entry_ids,
          unfunded_usd, expires_at, limit_hit, cap_reached)
        )
        SELECT ${batch.ledger.added} AS added`.pipe(Effect.map(([row]) => row?.added ?? 0))
    }

    /** Wallets with a hold past its time, for the expiry sweep. */
    const walletsWithExpiredHolds = SqlSchema.findAll({
      Request: Schema.Struct({ limit: Schema.Int }),
      Result: ExpiredSession,
      execute: ({ limit }) =>
        sql`SELECT DISTINCT w.id AS wallet_id, w.account_kind, w.account_id
            FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
            WHERE s.state = 'open' AND s.expires_at <= now()
            LIMIT ${limit}`
    })

    const expiredSessions = SqlSchema.findAll({
      Request: Schema.String,
      Result: SessionRow,
      execute: (walletId) =>
        sql`SELECT ${sql.literal(SESSION_COLUMNS.join(", "))} FROM settlement_sessions
            WHERE wallet_id = ${walletId} AND state = 'open' AND expires_at <= now()`
    })

    return {
      /**
       * The batch's state, and what two reads of other repositories answer in the same statement:
       * the limits and the thresholds of its accounts, read after the same locks.
       */
      findBatchState: <L, T>(
        request: BatchStateRequest,
        limits: EmbeddedRead<L>,
        thresholds: EmbeddedRead<T>
      ) =>
        Effect.gen(function*() {
          const rows = yield* orDefect(findBatchState)(request, [limits.select, thresholds.select])
          const embedded = (index: number) => rows.find((row) => row.row_kind === "embedded" && row.embedded === index)
          const limitsRow = embedded(0)
          const thresholdsRow = embedded(1)
          const state = rows.flatMap((row): Array<BatchState> =>
            row.row_kind === "session"
              ? [{
                _tag: "Session",
                wallet_id: row.wallet_id,
                session: sessionStateOf(row),
                created_at: row.created_at
              }]
              : row.row_kind === "record"
              ? [{
                _tag: "Record",
                wallet_id: row.wallet_id,
                idempotency_key: row.idempotency_key,
                first: storedOutcomeOf(row)
              }]
              : []
          )
          return {
            state,
            limits: yield* limits.decode(limitsRow?.row_kind === "embedded" ? limitsRow.rows : []),
            thresholds: yield* thresholds.decode(thresholdsRow?.row_kind === "embedded" ? thresholdsRow.rows : [])
          }
        }),
      saveBatch: orDefect(saveBatch),
      walletsWithExpiredHolds: orDefect(walletsWithExpiredHolds),
      expiredSessions: (walletId: string) =>
        Effect.map(
          orDefect(expiredSessions)(walletId),
          (rows) => rows.map((row) => ({ session: sessionStateOf(row), created_at: row.created_at }))
        )
    } as const
  })
}) {}
