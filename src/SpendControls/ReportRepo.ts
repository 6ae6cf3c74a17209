import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKind } from "../Domain/Account.js"
import * as Money from "../Domain/Money.js"
import { isTimeDimension, MAX_SPEND_DIMENSIONS, SpendDimension } from "../Domain/Spend.js"
import { orDefect } from "../Sql/Errors.js"

/**
 * One group of the report: its key in each dimension asked (`k1` to `k3`, null past the last),
 * or (`is_total`, every key null) the sum over all of them.
 */
const SpendRow = Schema.Struct({
  is_total: Schema.Boolean,
  k1: Schema.NullOr(Schema.String),
  k2: Schema.NullOr(Schema.String),
  k3: Schema.NullOr(Schema.String),
  spent_usd: Money.Usd,
  unfunded_usd: Money.Usd,
  sessions: Schema.NumberFromString.pipe(Schema.int())
})
export type SpendRow = typeof SpendRow.Type

/**
 * The spend report's read of the running totals (D16, D19), through settlement's view of them
 * (`settlement_spend_total_rows`, as the books read them): never the ledger. The account's wallet is
 * found in the same statement (none: no rows, and a zero total), one round trip per report. Days
 * are the account's local days (D22). A window of at most 366 days reads only that window's rows,
 * through the totals' key index (wallet, local day, …), whatever the wallet's history.
 */
export class SpendReportRepo extends Effect.Service<SpendReportRepo>()("SpendControls/ReportRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** A dimension's key of a totals row; a label's key is a parameter, never part of the statement's text. */
    const keyOf = (dimension: SpendDimension) => {
      switch (dimension) {
        case "repository":
          return sql`repository_id::text`
        case "user":
          return sql`user_id::text`
        case "model":
          return sql`model`
        case "day":
          return sql`to_char(local_day, 'YYYY-MM-DD')`
        case "month":
          return sql`to_char(local_day, 'YYYY-MM')`
        default:
          return sql`labels ->> ${dimension.slice("label:".length)}::text`
      }
    }

    const COLUMNS = ["k1", "k2", "k3"] as const

    /**
     * The groups, at most `limit`, and one more row: the total over every group, the groups left
     * out included. Which groups are left out is the same whatever the dimensions: the smallest
     * spends (ties by keys, null last). Listed by spend, largest first, ties by keys in the order
     * asked, null last; with a time dimension, by time first (oldest first), then as before.
     */
    const report = SqlSchema.findAll({
      Request: Schema.Struct({
        account_kind: AccountKind,
        account_id: Schema.String,
        from: Schema.String,
        to: Schema.String,
        dimensions: Schema.Array(SpendDimension).pipe(Schema.minItems(1), Schema.maxItems(MAX_SPEND_DIMENSIONS)),
        limit: Schema.Int
      }),
      Result: SpendRow,
      execute: ({ account_id, account_kind, dimensions, from, limit, to }) => {
        const keys = COLUMNS.map((column, i) => {
          const dimension = dimensions[i]
          return dimension === undefined
            ? sql`NULL::text AS ${sql(column)}`
            : sql`${keyOf(dimension)} AS ${sql(column)}`
        })
        const used = COLUMNS.slice(0, dimensions.length)
        const byKeys = used.map((column) => sql`${sql(column)} ASC NULLS LAST`)
        const byTime = used.flatMap((column, i) => {
          const dimension = dimensions[i]
          return dimension !== undefined && isTimeDimension(dimension) ? [sql`${sql(column)} ASC`] : []
        })
        const rank = sql.csv([sql`spent_usd DESC`, ...byKeys])
        const listing = sql.csv([...byTime, sql`spent_usd DESC`, ...byKeys])
        return sql`
          WITH rows AS (
            SELECT ${sql.csv(keys)}, spent_usd, unfunded_usd, sessions FROM settlement_spend_total_rows
            WHERE wallet_id = (SELECT id FROM wallets WHERE account_id = ${account_id} AND account_kind = ${account_kind})
              AND local_day >= ${from}::date AND local_day < ${to}::date
          ), groups AS (
            SELECT k1, k2, k3, round(sum(spent_usd), 6) AS spent_usd, round(sum(unfunded_usd), 6) AS unfunded_usd,
                   sum(sessions) AS sessions
            FROM rows GROUP BY k1, k2, k3
          ), listed AS (
            SELECT * FROM groups ORDER BY ${rank} LIMIT ${limit}
          )
          SELECT is_total, k1, k2, k3, spent_usd, unfunded_usd, sessions FROM (
            SELECT false AS is_total, row_number() OVER (ORDER BY ${listing}) AS place, k1, k2, k3,
                   spent_usd::text, unfunded_usd::text, sessions::text
            FROM listed
            UNION ALL
            SELECT true, 0, NULL, NULL, NULL, round(coalesce(sum(spent_usd), 0), 6)::text,
                   round(coalesce(sum(unfunded_usd), 0), 6)::text, coalesce(sum(sessions), 0)::text
            FROM groups
          ) report ORDER BY is_total, place`
      }
    })

    return { report: orDefect(report) } as const
  })
}) {}
