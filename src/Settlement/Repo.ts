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
     * `wallet_grants_due_idx` through the wallets' read model `wallet_grants_due` (migration 0026),
     * whatever the number of grants.
     */
    const walletsWithDueGrants = SqlSchema.findAll({
      Request: Schema.Struct({ limit: Schema.Int }),
      Result: ExpiredSession,
      execute: ({ limit }) =>
        sql`SELECT w.id AS wallet_id, w.account_kind, w.account_id
            FROM (SELECT DISTINCT wallet_id FROM wallet_grants_due WHERE next_due_at <= now() LIMIT ${limit}) g
            JOIN wallets w ON w.id = g.wallet_id`
    })

    /**
     * Removes up to `limit` counters by the minute and quarter hour past keeping (D22, migration
     * 0028): minutes after 8 days (a rolling window is at most 7), quarter hours after 35 (a
     * month's edges); answers how many it removed. By `settlement_scope_recent_age_idx`, a block
     * range index on the time.
     */
    const pruneRecentSpends = SqlSchema.single({
      Request: Schema.Struct({ limit: Schema.Int }),
      Result: Schema.Struct({ removed: Schema.Int }),
      execute: ({ limit }) =>
        sql`WITH old AS (
              SELECT wallet_id, scope, scope_key, grain, at FROM settlement_scope_recent
              WHERE grain = 1 AND at < now() - interval '8 days'
              UNION ALL
              SELECT wallet_id, scope, scope_key, grain, at FROM settlement_scope_recent
              WHERE grain = 15 AND at < now() - interval '35 days'
              LIMIT ${limit}
            ), removed AS (
              DELETE FROM settlement_scope_recent r USING old
              WHERE r.wallet_id = old.wallet_id AND r.scope = old.scope AND r.scope_key = old.scope_key
                AND r.grain = old.grain AND r.at = old.at
              RETURNING 1
            )
            SELECT count(*)::integer AS removed FROM removed`
    })

    return {
      pruneRecentSpends: orDefect(pruneRecentSpends),
      walletsWithExpiredHolds: orDefect(walletsWithExpiredHolds),
      walletsWithDueGrants: orDefect(walletsWithDueGrants)
    } as const
  })
}) {}
