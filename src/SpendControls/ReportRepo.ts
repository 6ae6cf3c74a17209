import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKind } from "../Domain/Account.js"
import * as Money from "../Domain/Money.js"
import { SpendGroupBy } from "../Domain/Spend.js"
import { orDefect } from "../Sql/Errors.js"

/** One group of the report, or (key `null`, `is_total`) the sum over all of them. */
const SpendRow = Schema.Struct({
  is_total: Schema.Boolean,
  key: Schema.NullOr(Schema.String),
  spent_usd: Money.Usd,
  unfunded_usd: Money.Usd,
  sessions: Schema.NumberFromString.pipe(Schema.int())
})
export type SpendRow = typeof SpendRow.Type

/**
 * The spend report's read of the running totals (D16), through settlement's view of them
 * (`settlement_spend_total_rows`, as the books read them): never the ledger. The account's wallet is
 * found in the same statement (none: no rows, and a zero total), one round trip per report. A window of at most
 * 366 days sums at most 366 rows per attribution, whatever the wallet's history, through the
 * totals' key index (wallet, day, …).
 */
export class SpendReportRepo extends Effect.Service<SpendReportRepo>()("SpendControls/ReportRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const keyOf = {
      repository: sql`repository_id::text`,
      user: sql`user_id::text`,
      day: sql`to_char(day, 'YYYY-MM-DD')`,
      month: sql`to_char(day, 'YYYY-MM')`
    } as const

    /**
     * The groups, at most `limit` (largest spend first, ties by key, null last; days and months in
     * order), and one more row: the total over every group, the groups left out included.
     */
    const report = SqlSchema.findAll({
      Request: Schema.Struct({
        account_kind: AccountKind,
        account_id: Schema.String,
        from: Schema.String,
        to: Schema.String,
        group_by: SpendGroupBy,
        limit: Schema.Int
      }),
      Result: SpendRow,
      execute: ({ account_id, account_kind, from, group_by, limit, to }) => {
        const order = group_by === "day" || group_by === "month"
          ? sql`key`
          : sql`spent_usd DESC, key ASC NULLS LAST`
        return sql`
          WITH rows AS (
            SELECT ${keyOf[group_by]} AS key, spent_usd, unfunded_usd, sessions FROM settlement_spend_total_rows
            WHERE wallet_id = (SELECT id FROM wallets WHERE account_id = ${account_id} AND account_kind = ${account_kind})
              AND day >= ${from}::date AND day < ${to}::date
          ), groups AS (
            SELECT key, round(sum(spent_usd), 6) AS spent_usd, round(sum(unfunded_usd), 6) AS unfunded_usd,
                   sum(sessions) AS sessions
            FROM rows GROUP BY key
          ), listed AS (
            SELECT *, row_number() OVER (ORDER BY ${order}) AS place FROM groups ORDER BY place LIMIT ${limit}
          )
          SELECT is_total, key, spent_usd, unfunded_usd, sessions FROM (
            SELECT false AS is_total, place, key, spent_usd::text, unfunded_usd::text, sessions::text FROM listed
            UNION ALL
            SELECT true, 0, NULL, round(coalesce(sum(spent_usd), 0), 6)::text,
                   round(coalesce(sum(unfunded_usd), 0), 6)::text, coalesce(sum(sessions), 0)::text
            FROM groups
          ) report ORDER BY is_total, place`
      }
    })

    return { report: orDefect(report) } as const
  })
}) {}
