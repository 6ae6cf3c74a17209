import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKey } from "../Domain/Account.js"
import { orDefect } from "../Sql/Errors.js"

const SavedSet = Schema.Struct({ version: Schema.Int, updated_at: Schema.DateFromSelf })

/**
 * The list as columns: one array per field, the same length; `null` scope ids for account and
 * session limits, `null` amounts for concurrency limits and `null` bounds for spend limits (D19).
 */
const LimitColumns = Schema.Struct({
  ...AccountKey.fields,
  scopes: Schema.Array(Schema.String),
  scope_ids: Schema.Array(Schema.NullOr(Schema.String)),
  periods: Schema.Array(Schema.String),
  window_minutes: Schema.Array(Schema.NullOr(Schema.Int)),
  amounts: Schema.Array(Schema.NullOr(Schema.String)),
  max_open_sessions: Schema.Array(Schema.NullOr(Schema.Int)),
  warn_at_percent: Schema.Array(Schema.Array(Schema.Int)),
  raise_amounts: Schema.Array(Schema.NullOr(Schema.String)),
  raise_untils: Schema.Array(Schema.NullOr(Schema.String))
})

/**
 * Each limit's warnings as an array literal (`{50,80}`), one text per limit: `unnest` would
 * flatten an array of arrays, and rows' lists differ in length. They are integers, checked.
 */
const arrayLiteral = (percents: ReadonlyArray<number>) => `{${percents.map((p) => p.toFixed(0)).join(",")}}`

/**
 * The writes of an account's spend limits (D16, D19), SQL only: `PUT /developer/account/limits`
 * replaces the whole list under the set's version (D5). The reads, with what each limit has
 * used, are `LimitsRepo.ts`'s.
 */
export class LimitsWriteRepo extends Effect.Service<LimitsWriteRepo>()("SpendControls/LimitsWriteRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The first save (expected version 0): nothing when a concurrent first save won. */
    const insertSet = SqlSchema.findOne({
      Request: AccountKey,
      Result: SavedSet,
      execute: ({ account_id, account_kind }) =>
        sql`INSERT INTO spend_limit_sets (account_kind, account_id, version)
            VALUES (${account_kind}, ${account_id}, 1)
            ON CONFLICT DO NOTHING
            RETURNING version, updated_at`
    })

    /**
     * A later save: nothing unless the stored version is still the expected one. The row stays
     * locked until the transaction ends, so the list written after it is this writer's alone.
     */
    const updateSet = SqlSchema.findOne({
      Request: Schema.Struct({ ...AccountKey.fields, expected_version: Schema.Int }),
      Result: SavedSet,
      execute: ({ account_id, account_kind, expected_version }) =>
        sql`UPDATE spend_limit_sets SET version = version + 1, updated_at = now()
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND version = ${expected_version}
            RETURNING version, updated_at`
    })

    /** Removes the account's limits that the new list does not name by (scope, scope id, period). */
    const deleteOthers = SqlSchema.void({
      Request: LimitColumns,
      execute: ({ account_id, account_kind, periods, scope_ids, scopes, window_minutes }) =>
        sql`DELETE FROM spend_limits l
            WHERE l.account_kind = ${account_kind} AND l.account_id = ${account_id}
              AND NOT EXISTS (
                SELECT 1 FROM unnest(${scopes}::text[], ${scope_ids}::text[], ${periods}::text[], ${window_minutes}::integer[])
                  AS n (scope, scope_id, period, window_minutes)
                WHERE n.scope = l.scope AND n.scope_id IS NOT DISTINCT FROM l.scope_id AND n.period = l.period
                  AND n.window_minutes IS NOT DISTINCT FROM l.window_minutes)`
    })

    /**
     * Writes the list's amounts, bounds, warnings and raises. A limit the account had already
     * (same scope, scope id and period) keeps its id, so a limit named in earlier job results and
     * events is still the same one, and takes the new values.
     */
    const upsertLimits = SqlSchema.void({
      Request: LimitColumns,
      execute: (
        {
          account_id,
          account_kind,
          amounts,
          max_open_sessions,
          periods,
          raise_amounts,
          raise_untils,
          scope_ids,
          scopes,
          warn_at_percent,
          window_minutes
        }
      ) =>
        sql`INSERT INTO spend_limits (account_kind, account_id, scope, scope_id, period, window_minutes, amount_usd,
              max_open_sessions, warn_at_percent, raise_amount_usd, raise_until)
            SELECT ${account_kind}, ${account_id}, n.scope, n.scope_id, n.period, n.window_minutes, n.amount, n.max_open,
              n.warn::smallint[], n.raise_amount, n.raise_until
            FROM unnest(${scopes}::text[], ${scope_ids}::text[], ${periods}::text[], ${window_minutes}::integer[],
                ${amounts}::numeric[],
                ${max_open_sessions}::integer[], ${
          warn_at_percent.map(arrayLiteral)
        }::text[], ${raise_amounts}::numeric[],
                ${raise_untils}::timestamptz[])
              WITH ORDINALITY AS n (scope, scope_id, period, window_minutes, amount, max_open, warn, raise_amount,
                raise_until, place)
            ORDER BY n.place
            ON CONFLICT (account_kind, account_id, scope, scope_id, period, window_minutes) DO UPDATE SET
              amount_usd = EXCLUDED.amount_usd,
              max_open_sessions = EXCLUDED.max_open_sessions,
              warn_at_percent = EXCLUDED.warn_at_percent,
              raise_amount_usd = EXCLUDED.raise_amount_usd,
              raise_until = EXCLUDED.raise_until`
    })

    /**
     * An approved raise request (D22) as a save of the list: the set's version goes up by one
     * whatever it was, its row locked until the transaction ends as a PUT's is. Nothing when the
     * account never saved limits.
     */
    const bumpSet = SqlSchema.findOne({
      Request: AccountKey,
      Result: SavedSet,
      execute: ({ account_id, account_kind }) =>
        sql`UPDATE spend_limit_sets SET version = version + 1, updated_at = now()
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}
            RETURNING version, updated_at`
    })

    /** One spend limit's raise (D19), the rest of the list as it is; false when the account has no such spend limit. */
    const setRaise = SqlSchema.findAll({
      Request: Schema.Struct({
        ...AccountKey.fields,
        limit_id: Schema.String,
        raise_amount: Schema.String,
        raise_until: Schema.String
      }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: ({ account_id, account_kind, limit_id, raise_amount, raise_until }) =>
        sql`UPDATE spend_limits SET raise_amount_usd = ${raise_amount}::numeric, raise_until = ${raise_until}::timestamptz
            WHERE id = ${limit_id} AND account_kind = ${account_kind} AND account_id = ${account_id}
              AND period <> 'concurrent'
            RETURNING id`
    })

    return {
      bumpSet: orDefect(bumpSet),
      setRaise: (request: Parameters<typeof setRaise>[0]) =>
        Effect.map(orDefect(setRaise)(request), (rows) => rows.length > 0),
      insertSet: orDefect(insertSet),
      updateSet: orDefect(updateSet),
      deleteOthers: orDefect(deleteOthers),
      upsertLimits: orDefect(upsertLimits)
    } as const
  })
}) {}
