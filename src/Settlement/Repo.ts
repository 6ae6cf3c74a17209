import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import * as Money from "../Domain/Money.js"
import { Outcome } from "./Jobs.js"

export const SessionRow = Schema.Struct({
  session_id: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  held: Money.Usd,
  spent: Money.Usd,
  state: Schema.Literal("open", "released", "expired"),
  expires_at: Schema.DateFromSelf
})
export type SessionRow = typeof SessionRow.Type

export const RecordRow = Schema.Struct({
  idempotency_key: Schema.String,
  outcome: Outcome,
  entry_ids: Schema.Array(Schema.String),
  unfunded_usd: Schema.NullOr(Money.Usd)
})
export type RecordRow = typeof RecordRow.Type

const NewRecord = Schema.Struct({
  idempotency_key: Schema.String,
  kind: Schema.Literal("reserve", "spend", "release"),
  session_id: Schema.String,
  outcome: Outcome,
  entry_ids: Schema.Array(Schema.String),
  unfunded_usd: Schema.NullOr(Schema.String)
})
export type NewRecord = typeof NewRecord.Type

const ExpiredSession = Schema.Struct({ wallet_id: Schema.String, account_kind: Schema.Literal("client", "user"), account_id: Schema.String })

/**
 * Sessions and the first outcome of every settlement key (D8): SQL only. Every
 * query of a batch takes arrays, so a batch of any size costs the same number
 * of statements.
 */
export class SettlementRepo extends Effect.Service<SettlementRepo>()("Settlement/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const findRecords = SqlSchema.findAll({
      Request: Schema.Struct({ wallet_id: Schema.String, keys: Schema.Array(Schema.String) }),
      Result: RecordRow,
      execute: ({ keys, wallet_id }) =>
        sql`SELECT idempotency_key, outcome, entry_ids::text[] AS entry_ids, unfunded_usd
            FROM settlement_records
            WHERE wallet_id = ${wallet_id} AND idempotency_key = ANY(${keys}::text[])`
    })

    /** The batch's sessions; the wallet's row lock already serialises every writer of them. */
    const findSessions = SqlSchema.findAll({
      Request: Schema.Struct({ wallet_id: Schema.String, session_ids: Schema.Array(Schema.String) }),
      Result: SessionRow,
      execute: ({ session_ids, wallet_id }) =>
        sql`SELECT session_id, task_id, held_usd AS held, spent_usd AS spent, state, expires_at
            FROM settlement_sessions
            WHERE wallet_id = ${wallet_id} AND session_id = ANY(${session_ids}::text[])`
    })

    const upsertSessions = (walletId: string, sessions: ReadonlyArray<SessionRow>) =>
      sessions.length === 0 ? Effect.void : sql`
        INSERT INTO settlement_sessions (wallet_id, session_id, task_id, held_usd, spent_usd, state, expires_at)
        SELECT ${walletId}::uuid, s.session_id, s.task_id, s.held, s.spent, s.state::settlement_session_state, s.expires_at
        FROM unnest(${sessions.map((s) => s.session_id)}::text[], ${sessions.map((s) => s.task_id)}::text[],
                    ${sessions.map((s) => Money.format(s.held))}::numeric[], ${sessions.map((s) => Money.format(s.spent))}::numeric[],
                    ${sessions.map((s) => s.state)}::text[], ${sessions.map((s) => s.expires_at.toISOString())}::timestamptz[])
          AS s (session_id, task_id, held, spent, state, expires_at)
        ON CONFLICT (wallet_id, session_id) DO UPDATE SET
          task_id = EXCLUDED.task_id, held_usd = EXCLUDED.held_usd, spent_usd = EXCLUDED.spent_usd,
          state = EXCLUDED.state, expires_at = EXCLUDED.expires_at, updated_at = now()`.pipe(Effect.asVoid)

    const insertRecords = (walletId: string, records: ReadonlyArray<NewRecord>) =>
      records.length === 0 ? Effect.void : sql`
        INSERT INTO settlement_records (wallet_id, idempotency_key, kind, session_id, outcome, entry_ids, unfunded_usd)
        SELECT ${walletId}::uuid, r.idempotency_key, r.kind, r.session_id, r.outcome::settlement_outcome,
               string_to_array(r.entry_ids, ',')::uuid[], r.unfunded_usd
        FROM unnest(${records.map((r) => r.idempotency_key)}::text[], ${records.map((r) => r.kind)}::text[],
                    ${records.map((r) => r.session_id)}::text[], ${records.map((r) => r.outcome)}::text[],
                    ${records.map((r) => r.entry_ids.join(","))}::text[], ${records.map((r) => r.unfunded_usd)}::numeric[])
          AS r (idempotency_key, kind, session_id, outcome, entry_ids, unfunded_usd)`.pipe(Effect.asVoid)

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
        sql`SELECT session_id, task_id, held_usd AS held, spent_usd AS spent, state, expires_at
            FROM settlement_sessions
            WHERE wallet_id = ${walletId} AND state = 'open' AND expires_at <= now()`
    })

    return { findRecords, findSessions, upsertSessions, insertRecords, walletsWithExpiredHolds, expiredSessions } as const
  })
}) {}
