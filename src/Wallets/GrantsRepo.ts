import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { type GrantBalance, nextDueAt } from "../Domain/Grants.js"
import * as Money from "../Domain/Money.js"
import { orDefect } from "../Sql/Errors.js"
import { GrantRow, grantWrite, type NewGrant } from "./GrantRows.js"

/**
 * A wallet's grants: SQL only, no decisions. Every write here runs under the wallet's row lock,
 * in the transaction that writes that row (Wallets.ts), as the settlement transition's own write
 * of grants does (Settlement/Transition.ts).
 */
export class GrantsRepo extends Effect.Service<GrantsRepo>()("Wallets/GrantsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const columns = sql`id, wallet_id, entry_id, amount_usd, drawn_usd, held_usd, ended_usd, priority, category,
      expires_at, state, note, created_at, warned_days`

    /** What can still move: live grants, and ended ones whose earmarks are held (`wallet_grants_moving_idx`). */
    const moving = SqlSchema.findAll({
      Request: Schema.String,
      Result: GrantRow,
      execute: (walletId) =>
        sql`SELECT ${columns} FROM wallet_grants
            WHERE wallet_id = ${walletId} AND moving`
    })

    const byId = SqlSchema.findOne({
      Request: Schema.Struct({ wallet_id: Schema.String, id: Schema.String }),
      Result: GrantRow,
      execute: ({ id, wallet_id }) =>
        sql`SELECT ${columns} FROM wallet_grants WHERE wallet_id = ${wallet_id} AND id = ${id}::uuid`
    })

    /** Every grant of the wallet, newest first: the service orders the live ones. */
    const all = SqlSchema.findAll({
      Request: Schema.Struct({ wallet_id: Schema.String, ended: Schema.Boolean, live: Schema.Boolean }),
      Result: GrantRow,
      execute: ({ ended, live, wallet_id }) =>
        sql`SELECT ${columns} FROM wallet_grants
            WHERE wallet_id = ${wallet_id}
              AND ((${live} AND state = 'live') OR (${ended} AND state <> 'live'))
            ORDER BY wallet_id, created_at DESC, id DESC`
    })

    const insert = (grant: NewGrant) =>
      sql`INSERT INTO wallet_grants (id, wallet_id, entry_id, amount_usd, priority, category, expires_at, note,
            created_at, next_due_at)
          VALUES (${grant.id}, ${grant.wallet_id}, ${grant.entry_id}, ${Money.format(grant.balance.amount)},
            ${grant.balance.priority}, ${grant.balance.category}, ${grant.balance.expires_at?.toISOString() ?? null},
            ${grant.note}, now(), ${nextDueAt(grant.balance)?.toISOString() ?? null})`

    /** The grants a transaction moved, as it leaves them; `ended_at` is stamped when one ends. */
    const update = (grants: ReadonlyArray<GrantBalance>) =>
      grants.length === 0 ? Effect.void : sql`
        UPDATE wallet_grants g SET drawn_usd = u.drawn_usd, held_usd = u.held_usd, ended_usd = u.ended_usd,
          state = u.state::grant_state, warned_days = u.warned_days, next_due_at = u.next_due_at,
            moving = (u.state = 'live' OR u.held_usd > 0),
          ended_at = CASE WHEN g.state = 'live' AND u.state <> 'live' THEN now() ELSE g.ended_at END
        FROM json_to_recordset(${JSON.stringify(grants.map(grantWrite))}::json) AS u (
          id uuid, drawn_usd numeric, held_usd numeric, ended_usd numeric, state text, warned_days smallint,
          next_due_at timestamptz)
        WHERE g.id = u.id`.pipe(Effect.asVoid)

    return {
      moving: orDefect(moving),
      byId: orDefect(byId),
      all: orDefect(all),
      insert: orDefect((grant: NewGrant) => Effect.asVoid(insert(grant))),
      update: orDefect(update)
    } as const
  })
}) {}
