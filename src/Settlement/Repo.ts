import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { orDefect } from "../Sql/Errors.js"

const ExpiredSession = Schema.Struct({
  wallet_id: Schema.String,
  account_kind: Schema.Literal("client", "user"),
  account_id: Schema.String
})

/**
 * The expiry sweep's scan (D8): which wallets hold past their time. SQL only; the release itself
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

    return { walletsWithExpiredHolds: orDefect(walletsWithExpiredHolds) } as const
  })
}) {}
