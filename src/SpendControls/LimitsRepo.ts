import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { type Account, AccountKind } from "../Domain/Account.js"
import * as Money from "../Domain/Money.js"
import { LimitPeriod, LimitScope, periodOf, type UsedLimit, utcDay } from "../Domain/SpendLimit.js"
import { type EmbeddedRead, embeddedRead } from "../Sql/Embedded.js"
import { orDefect } from "../Sql/Errors.js"

const UsedLimitRow = Schema.Struct({
  account_kind: AccountKind,
  account_id: Schema.String,
  id: Schema.String,
  scope: LimitScope,
  scope_id: Schema.NullOr(Schema.String),
  period: LimitPeriod,
  amount_usd: Money.Usd,
  used_usd: Money.Usd,
  /** Its `limit.reached` event was written in its current period (D17). */
  announced: Schema.Boolean
})
type UsedLimitRow = typeof UsedLimitRow.Type

const UsedLimitsRequest = Schema.Struct({
  kinds: Schema.Array(AccountKind),
  ids: Schema.Array(Schema.String),
  periods: Schema.Array(Schema.String),
  starts: Schema.Array(Schema.String),
  ends: Schema.Array(Schema.String)
})
type UsedLimitsRequest = typeof UsedLimitsRequest.Type

const LimitSetRow = Schema.Struct({
  account_kind: AccountKind,
  account_id: Schema.String,
  version: Schema.Int,
  updated_at: Schema.DateFromSelf
})
export type LimitSet = typeof LimitSetRow.Type

/** An account's limits with their use, as the settlement batch and `GET /developer/account/limits` read them. */
export interface AccountLimits {
  readonly account: Account
  readonly limits: ReadonlyArray<UsedLimit>
  /** The limits whose `limit.reached` event their current period has had already (D17). */
  readonly announced: ReadonlySet<string>
}

/** The calendar periods a limit can count over; `session` has no bounds. */
const CALENDAR_PERIODS = ["day", "week", "month"] as const

/**
 * Spend limits and what they have used (D16), SQL only: the one home of "used", read by the
 * limits' GET and by the settlement batch, which reads it after its wallets' row locks (every
 * writer of an account's money takes its wallet's lock first, so the figure cannot move under
 * the batch and the check is atomic).
 *
 * `used_usd` is the spends booked in the limit's current UTC period by the sessions in its scope
 * (from the running totals, through settlement's view `settlement_spend_total_rows`) plus the holds
 * those sessions have open now (the wallet's reserved balance for the account, the open sessions'
 * holds for a repository or a user). For a session limit, the largest held + spent among the open
 * sessions it governs (those without a `max_usd` of their own).
 */
export class SpendLimitsRepo extends Effect.Service<SpendLimitsRepo>()("SpendControls/LimitsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Amounts as text, so that the rows read alike from `pg` and embedded as JSON (`usedEmbedded`). */
    const usedLimitsSelect = ({ ends, ids, kinds, periods, starts }: UsedLimitsRequest) =>
      sql`
          WITH accounts AS (
            SELECT * FROM unnest(${kinds}::account_kind[], ${ids}::uuid[]) AS a (account_kind, account_id)
          ), bounds AS (
            SELECT * FROM unnest(${periods}::text[], ${starts}::date[], ${ends}::date[]) AS b (period, first_day, end_day)
          )
          SELECT l.account_kind::text AS account_kind, l.account_id, l.id, l.scope, l.scope_id, l.period, l.amount_usd::text,
            -- Six decimals, as every amount reads (D6), however many rows were summed.
            (CASE
              WHEN w.id IS NULL THEN 0
              WHEN l.scope = 'session' THEN (
                SELECT coalesce(max(s.held_usd + s.spent_usd), 0) FROM settlement_sessions s
                WHERE s.wallet_id = w.id AND s.state = 'open' AND s.max_usd IS NULL)
              ELSE (
                SELECT coalesce(sum(t.spent_usd), 0) FROM settlement_spend_total_rows t
                WHERE t.wallet_id = w.id AND t.day >= b.first_day AND t.day < b.end_day
                  AND (l.scope = 'account' OR (l.scope = 'repository' AND t.repository_id = l.scope_id)
                    OR (l.scope = 'user' AND t.user_id = l.scope_id)))
              + CASE
                WHEN l.scope = 'account' THEN w.reserved_usd
                ELSE (
                  SELECT coalesce(sum(s.held_usd), 0) FROM settlement_sessions s
                  WHERE s.wallet_id = w.id AND s.state = 'open'
                    AND ((l.scope = 'repository' AND s.repository_id = l.scope_id)
                      OR (l.scope = 'user' AND s.user_id = l.scope_id)))
              END
            END)::numeric(30, 6)::text AS used_usd,
            (b.first_day IS NOT NULL AND EXISTS (
              SELECT 1 FROM settlement_limit_announcements n
              WHERE n.limit_id = l.id AND n.period_start = b.first_day)) AS announced
          FROM accounts a
          JOIN spend_limits l ON l.account_kind = a.account_kind AND l.account_id = a.account_id
          LEFT JOIN wallets w ON w.account_kind = a.account_kind AND w.account_id = a.account_id
          LEFT JOIN bounds b ON b.period = l.period
          ORDER BY l.account_kind, l.account_id, l.id`

    const usedLimits = SqlSchema.findAll({
      Request: UsedLimitsRequest,
      Result: UsedLimitRow,
      execute: usedLimitsSelect
    })

    const limitSets = SqlSchema.findAll({
      Request: Schema.Struct({ kinds: Schema.Array(AccountKind), ids: Schema.Array(Schema.String) }),
      Result: LimitSetRow,
      execute: ({ ids, kinds }) =>
        sql`
          SELECT s.account_kind::text AS account_kind, s.account_id, s.version, s.updated_at
          FROM spend_limit_sets s
          JOIN unnest(${kinds}::account_kind[], ${ids}::uuid[]) AS a (account_kind, account_id)
            ON s.account_kind = a.account_kind AND s.account_id = a.account_id`
    })

    /** The request for the accounts' limits with their periods' bounds at `now`. */
    const usedRequest = (accounts: ReadonlyArray<Account>, now: Date): UsedLimitsRequest => {
      const bounds = CALENDAR_PERIODS.map((period) => {
        const { end, start } = periodOf(period, now) ?? { start: now, end: now }
        return { period, start, end }
      })
      return {
        kinds: accounts.map((account) => account.kind),
        ids: accounts.map((account) => account.id),
        periods: bounds.map((b) => b.period),
        starts: bounds.map((b) => utcDay(b.start)),
        ends: bounds.map((b) => utcDay(b.end))
      }
    }

    /** The rows by account, each limit with the bounds of its period holding `now`. */
    const accountLimitsOf = (accounts: ReadonlyArray<Account>, now: Date) => (rows: ReadonlyArray<UsedLimitRow>) =>
      accounts.flatMap((account): Array<AccountLimits> => {
        const own = rows.filter((row) => row.account_kind === account.kind && row.account_id === account.id)
        const limits = own.map((row): UsedLimit => {
          const period = periodOf(row.period, now)
          return {
            id: row.id,
            scope: row.scope,
            scope_id: row.scope_id,
            period: row.period,
            amount_usd: row.amount_usd,
            used_usd: row.used_usd,
            period_start: period?.start ?? null,
            period_end: period?.end ?? null
          }
        })
        const announced = new Set(own.flatMap((row) => row.announced ? [row.id] : []))
        return limits.length === 0 ? [] : [{ account, limits, announced }]
      })

    /**
     * Every saved limit of the accounts, with `used_usd` and the bounds of its period holding
     * `now` (null for a session limit), in one statement for any number of accounts; an account
     * without limits is absent from the answer.
     */
    const findUsed = (accounts: ReadonlyArray<Account>, now: Date): Effect.Effect<ReadonlyArray<AccountLimits>> =>
      accounts.length === 0
        ? Effect.succeed([])
        : Effect.map(orDefect(usedLimits)(usedRequest(accounts, now)), accountLimitsOf(accounts, now))

    /** `findUsed` as a read another statement carries (the settlement batch's, after its wallets' locks). */
    const usedEmbedded = (accounts: ReadonlyArray<Account>, now: Date): EmbeddedRead<ReadonlyArray<AccountLimits>> =>
      embeddedRead(usedLimitsSelect(usedRequest(accounts, now)), UsedLimitRow, accountLimitsOf(accounts, now))

    /** The saved set's version and time of the accounts that have one (version 0, none saved, is absent). */
    const findSets = (accounts: ReadonlyArray<Account>): Effect.Effect<ReadonlyArray<LimitSet>> =>
      accounts.length === 0 ? Effect.succeed([]) : orDefect(limitSets)({
        kinds: accounts.map((account) => account.kind),
        ids: accounts.map((account) => account.id)
      })

    return { findUsed, usedEmbedded, findSets } as const
  })
}) {}
