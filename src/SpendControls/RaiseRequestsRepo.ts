import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKey } from "../Domain/Account.js"
import * as Money from "../Domain/Money.js"
import { RaiseRequestState } from "../Domain/RaiseRequests.js"
import { isSqlError, orDefect, sqlState } from "../Sql/Errors.js"

/** A request's row as stored (migration 0029), amounts as PostgreSQL's text of them. */
const RaiseRequestRow = Schema.Struct({
  id: Schema.String,
  limit_id: Schema.NullOr(Schema.String),
  amount_usd: Money.Usd,
  until: Schema.DateFromSelf,
  reason: Schema.String,
  requested_by: Schema.String,
  state: RaiseRequestState,
  decided_by: Schema.NullOr(Schema.String),
  decided_at: Schema.NullOr(Schema.DateFromSelf),
  decided_amount_usd: Schema.NullOr(Money.Usd),
  decided_until: Schema.NullOr(Schema.DateFromSelf),
  decline_reason: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromSelf
})
export type RaiseRequestRow = typeof RaiseRequestRow.Type

const KeyedId = Schema.Struct({ ...AccountKey.fields, id: Schema.String })

/**
 * Limit raise requests (D22), SQL only: `limit_raise_requests` (migration 0029), written by the
 * spend controls' raise request service. The limit a request names is the spend controls' own
 * `spend_limits`, read here only to make a request of a spend limit of the account.
 */
export class RaiseRequestsRepo extends Effect.Service<RaiseRequestsRepo>()("SpendControls/RaiseRequestsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const columns = sql`id, limit_id, amount_usd::text AS amount_usd, until, reason, requested_by, state, decided_by,
      decided_at, decided_amount_usd::text AS decided_amount_usd, decided_until, decline_reason, created_at`

    /**
     * Holds the account's new requests one at a time until the transaction ends, so two made at
     * once cannot both be its twentieth pending one. An advisory lock: no row of the account's is
     * locked, so approvals, declines and PUTs of the limits do not wait for it.
     */
    const lockAccount = SqlSchema.void({
      Request: AccountKey,
      execute: ({ account_id, account_kind }) =>
        sql`SELECT pg_advisory_xact_lock(hashtextextended(${`limit_raise_requests/${account_kind}/${account_id}`}, 0))`
    })

    const countPending = SqlSchema.single({
      Request: AccountKey,
      Result: Schema.Struct({ pending: Schema.Int }),
      execute: ({ account_id, account_kind }) =>
        sql`SELECT count(*)::integer AS pending FROM limit_raise_requests
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND state = 'pending'`
    })

    /** A new pending request of a spend limit of the account; nothing when the account has no such limit (now). */
    const insert = SqlSchema.findOne({
      Request: Schema.Struct({
        ...AccountKey.fields,
        limit_id: Schema.String,
        amount_usd: Schema.String,
        until: Schema.String,
        reason: Schema.String,
        requested_by: Schema.String
      }),
      Result: RaiseRequestRow,
      execute: ({ account_id, account_kind, amount_usd, limit_id, reason, requested_by, until }) =>
        sql`INSERT INTO limit_raise_requests (account_kind, account_id, limit_id, amount_usd, until, reason, requested_by)
            SELECT l.account_kind, l.account_id, l.id, ${amount_usd}::numeric, ${until}::timestamptz, ${reason},
              ${requested_by}::uuid
            FROM spend_limits l
            WHERE l.id = ${limit_id}::uuid AND l.account_kind = ${account_kind} AND l.account_id = ${account_id}
              AND l.period <> 'concurrent'
            RETURNING ${columns}`
    })

    const find = SqlSchema.findOne({
      Request: KeyedId,
      Result: RaiseRequestRow,
      execute: ({ account_id, account_kind, id }) =>
        sql`SELECT ${columns} FROM limit_raise_requests
            WHERE id = ${id}::uuid AND account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /** The account's requests in `states`, newest first; one member's when `requested_by` is set. */
    const list = SqlSchema.findAll({
      Request: Schema.Struct({
        ...AccountKey.fields,
        states: Schema.Array(RaiseRequestState),
        requested_by: Schema.NullOr(Schema.String),
        limit: Schema.Int
      }),
      Result: RaiseRequestRow,
      execute: ({ account_id, account_kind, limit, requested_by, states }) =>
        sql`SELECT ${columns} FROM limit_raise_requests
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND state = ANY (${states}::text[])
              AND (${requested_by}::uuid IS NULL OR requested_by = ${requested_by}::uuid)
            ORDER BY created_at DESC, id DESC
            LIMIT ${limit}`
    })

    /**
     * Decides a pending request: nothing unless it is still pending, its row locked by the update
     * until the transaction ends, so of deciders racing one decides and the others find it decided.
     */
    const decide = SqlSchema.findOne({
      Request: Schema.Struct({
        ...KeyedId.fields,
        state: Schema.Literal("approved", "declined"),
        decided_by: Schema.String,
        decided_amount_usd: Schema.NullOr(Schema.String),
        decided_until: Schema.NullOr(Schema.String),
        decline_reason: Schema.NullOr(Schema.String)
      }),
      Result: RaiseRequestRow,
      execute: (
        { account_id, account_kind, decided_amount_usd, decided_by, decided_until, decline_reason, id, state }
      ) =>
        sql`UPDATE limit_raise_requests SET state = ${state}, decided_by = ${decided_by}::uuid, decided_at = now(),
              decided_amount_usd = ${decided_amount_usd}::numeric, decided_until = ${decided_until}::timestamptz,
              decline_reason = ${decline_reason}
            WHERE id = ${id}::uuid AND account_kind = ${account_kind} AND account_id = ${account_id}
              AND state = 'pending'
            RETURNING ${columns}`
    })

    return {
      lockAccount: orDefect(lockAccount),
      countPending: (key: AccountKey) => Effect.map(orDefect(countPending)(key), (row) => row.pending),
      // A limit removed by a PUT between the read and the insert fails the reference (23503): none.
      insert: (request: Parameters<typeof insert>[0]) =>
        insert(request).pipe(
          Effect.catchIf((error) => isSqlError(error) && sqlState(error) === "23503", () => Effect.succeedNone),
          Effect.orDie
        ),
      find: orDefect(find),
      list: orDefect(list),
      decide: orDefect(decide)
    } as const
  })
}) {}
