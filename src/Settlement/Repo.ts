import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { orDefect } from "../Sql/Errors.js"

const ExpiredSession = Schema.Struct({
  wallet_id: Schema.String,
  account_kind: Schema.Literal("client", "user"),
  account_id: Schema.String
})

/**
 * The sweeps' scans: which wallets hold past their time (D8), which have a grant due (D21). SQL only; the release itself
 * is the settlement transition's (Transition.ts), as every batch's is.
 */
export class SettlementRepo extends Effect.Service<SettlementRepo>()("Settlement/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

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

    /**
     * Wallets with a live grant whose expiry or `grant.expiring` warning is due (D21): a probe of
     * `wallet_grants_due_idx` (migration 0026), whatever the number of grants.
     */
    const walletsWithDueGrants = SqlSchema.findAll({
      Request: Schema.Struct({ limit: Schema.Int }),
      Result: ExpiredSession,
      execute: ({ limit }) =>
        sql`SELECT w.id AS wallet_id, w.account_kind, w.account_id
            FROM (SELECT DISTINCT wallet_id FROM wallet_grants
              WHERE state = 'live' AND next_due_at <= now() LIMIT ${limit}) g
            JOIN wallets w ON w.id = g.wallet_id`
    })

    return {
      walletsWithExpiredHolds: orDefect(walletsWithExpiredHolds),
      walletsWithDueGrants: orDefect(walletsWithDueGrants)
    } as const
  })
}) {}
