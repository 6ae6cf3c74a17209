import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { LabelsColumn, shownLabels } from "../Domain/Labels.js"
import * as Money from "../Domain/Money.js"
import { SessionRowState, type SessionState } from "../Domain/SettlementSession.js"
import { orDefect } from "../Sql/Errors.js"

/**
 * A runner's settlement session as `settlement_sessions` stores it (D8, D12, D19): the one
 * declaration of its row, as the sessions view reads it and as the batch's events show a session
 * it wrote (`sessionRowOf`).
 */
export const SessionRow = Schema.Struct({
  session_id: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  state: SessionRowState,
  held_usd: Money.Usd,
  spent_usd: Money.Usd,
  unfunded_usd: Money.Usd,
  expires_at: Schema.DateFromSelf,
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf,
  repository_id: Schema.NullOr(Schema.String),
  user_id: Schema.NullOr(Schema.String),
  max_usd: Schema.NullOr(Money.Usd),
  /** Set by the first reserve (D19); `{}` when none (the column holds null then). */
  labels: LabelsColumn
})
export type SessionRow = typeof SessionRow.Type

/** The row's columns as `SessionRow` names them; the statements that read a session select these. */
export const SESSION_COLUMNS = [
  "session_id",
  "task_id",
  "state",
  "held_usd",
  "spent_usd",
  "unfunded_usd",
  "expires_at",
  "created_at",
  "updated_at",
  "repository_id",
  "user_id",
  "max_usd",
  "labels"
] as const satisfies ReadonlyArray<keyof SessionRow>

/**
 * A session as the planner left it, as its row reads once written: `created_at` is its first
 * write's, `updated_at` this one's. Its labels (D19) are the session's, `{}` when it has none.
 */
export const sessionRowOf = (session: SessionState, created_at: Date, updated_at: Date): SessionRow => ({
  session_id: session.session_id,
  task_id: session.task_id,
  state: session.state,
  held_usd: session.held,
  spent_usd: session.spent,
  unfunded_usd: session.unfunded,
  expires_at: session.expires_at,
  created_at,
  updated_at,
  repository_id: session.repository_id,
  user_id: session.user_id,
  max_usd: session.max_usd,
  labels: shownLabels(session.labels)
})

/**
 * The sessions view's reads (D12): a wallet's sessions, one by id or a page of them. The batch's
 * writes of the same table are in `Repo.ts`, of the same feature.
 */
export class SettlementSessionsRepo extends Effect.Service<SettlementSessionsRepo>()("Settlement/SessionsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal(`${SESSION_COLUMNS.map((column) => `s.${column}`).join(", ")}`)

    const findSession = SqlSchema.findOne({
      Request: Schema.Struct({ wallet_id: Schema.String, session_id: Schema.String }),
      Result: SessionRow,
      execute: ({ session_id, wallet_id }) =>
        sql`SELECT ${columns} FROM settlement_sessions s
            WHERE s.wallet_id = ${wallet_id} AND s.session_id = ${session_id}`
    })

    /**
     * Newest first, keyset on (opened, session id) from the row of `before` (D12, as the ledger
     * pages, D7): compared in PostgreSQL, whose timestamps are finer than JavaScript's. `fundedOnly`
     * keeps the sessions that hold or have spent something (D12's `open`, D19's count of open).
     */
    const pageSessions = SqlSchema.findAll({
      Request: Schema.Struct({
        wallet_id: Schema.String,
        states: Schema.Array(Schema.String),
        fundedOnly: Schema.Boolean,
        before: Schema.NullOr(Schema.String),
        limit: Schema.Int
      }),
      Result: SessionRow,
      execute: ({ before, fundedOnly, limit, states, wallet_id }) =>
        sql`SELECT ${columns} FROM settlement_sessions s
            WHERE s.wallet_id = ${wallet_id} AND s.state::text = ANY(${states}::text[])
              AND (NOT ${fundedOnly} OR s.held_usd > 0 OR s.spent_usd > 0)
              AND (${before}::text IS NULL OR (s.created_at, s.session_id) < (
                SELECT created_at, session_id FROM settlement_sessions WHERE wallet_id = ${wallet_id} AND session_id = ${before}))
            ORDER BY s.created_at DESC, s.session_id DESC
            LIMIT ${limit}`
    })

    return { findSession: orDefect(findSession), pageSessions: orDefect(pageSessions) } as const
  })
}) {}
