import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { type Account, AccountKind } from "../Domain/Account.js"
import * as Money from "../Domain/Money.js"
import { LimitScope, type UsedLimit, usedLimitOfColumns } from "../Domain/SpendLimit.js"
import { orDefect } from "../Sql/Errors.js"

const limitRowFields = {
  account_kind: AccountKind,
  account_id: Schema.String,
  id: Schema.String,
  scope: LimitScope,
  scope_id: Schema.NullOr(Schema.String),
  window_minutes: Schema.NullOr(Schema.Int),
  period_start: Schema.NullOr(Schema.DateFromSelf),
  period_end: Schema.NullOr(Schema.DateFromSelf)
}

/** A spend limit's row (D16, D19): its amount, use, warnings and raise; the table's checks make it one or the other. */
const SpendLimitRow = Schema.Struct({
  ...limitRowFields,
  period: Schema.Literal("hour", "day", "week", "month", "rolling", "session"),
  amount_usd: Money.Usd,
  used_usd: Money.Usd,
  warn_at_percent: Schema.Array(Schema.Int),
  raise_amount_usd: Schema.NullOr(Money.Usd),
  raise_until: Schema.NullOr(Schema.DateFromSelf)
})

/** A concurrency limit's row (D19): its bound and the sessions open in its scope now. */
const ConcurrencyLimitRow = Schema.Struct({
  ...limitRowFields,
  period: Schema.Literal("concurrent"),
  max_open_sessions: Schema.Int,
  open_sessions: Schema.Int
})

const UsedLimitRow = Schema.Union(SpendLimitRow, ConcurrencyLimitRow)
type UsedLimitRow = typeof UsedLimitRow.Type

const UsedLimitsRequest = Schema.Struct({
  kinds: Schema.Array(AccountKind),
  ids: Schema.Array(Schema.String),
  at: Schema.DateFromSelf
})
type UsedLimitsRequest = typeof UsedLimitsRequest.Type

const LimitSetRow = Schema.Struct({
  account_kind: AccountKind,
  account_id: Schema.String,
  version: Schema.Int,
  updated_at: Schema.DateFromSelf
})
export type LimitSet = typeof LimitSetRow.Type

/** An account's limits with their use, as `GET /developer/account/limits` reads them, and the zone of their periods. */
export interface AccountLimits {
  readonly account: Account
  readonly limits: ReadonlyArray<UsedLimit>
}

/**
 * Spend limits and what they have used (D16, D19), SQL only. A limit's use is counted by
 * settlement's `spend_limit_use` (migration 0022), the rule its batch enforces in its own read
 * (src/Settlement/Transition.ts): the spends booked in the limit's current UTC period by the
 * sessions in its scope plus the holds those sessions have open now (for a session limit, the
 * largest held + spent among the open sessions it governs), or a concurrency limit's sessions
 * open now; from the counters the batch keeps per scope key, so its cost does not grow with the
 * period's sessions, labels or models. Inlined by the planner into this statement.
 */
export class SpendLimitsRepo extends Effect.Service<SpendLimitsRepo>()("SpendControls/LimitsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * A limit's use is settlement's to count (migrations 0022, 0028), by the rules its batch
     * enforces, in the period `limit_bounds` finds in the account's zone at `at`; an `each_`
     * limit as saved applies to nobody in particular, so it has no use of its own here.
     */
    const usedLimitsSelect = ({ at, ids, kinds }: UsedLimitsRequest) =>
      sql`
          WITH accounts AS (
            SELECT * FROM unnest(${kinds}::account_kind[], ${ids}::uuid[]) AS a (account_kind, account_id)
          )
          SELECT l.account_kind::text AS account_kind, l.account_id, l.id, l.scope, l.scope_id, l.period,
            l.window_minutes, l.amount_usd::text, u.used_usd::text AS used_usd,
            l.warn_at_percent::integer[] AS warn_at_percent, l.raise_amount_usd::text, l.raise_until,
            l.max_open_sessions, u.open_sessions,
            CASE WHEN l.period = 'rolling' THEN NULL ELSE p.first END AS period_start,
            CASE WHEN l.period = 'rolling' THEN NULL ELSE p.until END AS period_end
          FROM accounts a
          JOIN spend_limits l ON l.account_kind = a.account_kind AND l.account_id = a.account_id
          LEFT JOIN account_period_settings z ON z.account_kind = a.account_kind AND z.account_id = a.account_id
          LEFT JOIN wallets w ON w.account_kind = a.account_kind AND w.account_id = a.account_id
          LEFT JOIN LATERAL limit_bounds(l.period, l.window_minutes, coalesce(z.timezone, 'UTC'),
            coalesce(z.week_start, 'monday'), coalesce(z.carried, '{}'), ${at}) p ON true
          CROSS JOIN LATERAL limit_use(l.period, l.scope, coalesce(l.scope_id, ''),
            CASE WHEN l.scope LIKE 'each%' THEN NULL ELSE w.id END, w.reserved_usd, p.first, p.until) u
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

    /** The rows by account, each limit with the bounds of its period holding `now`. */
    const accountLimitsOf = (accounts: ReadonlyArray<Account>, now: Date) => (rows: ReadonlyArray<UsedLimitRow>) =>
      accounts.flatMap((account): Array<AccountLimits> => {
        const own = rows.filter((row) => row.account_kind === account.kind && row.account_id === account.id)
        const limits = own.map((row) =>
          usedLimitOfColumns(
            row.period === "concurrent"
              ? {
                ...row,
                applies_to: null,
                amount_usd: null,
                used_usd: null,
                warn_at_percent: [],
                raise_amount_usd: null,
                raise_until: null,
                leaving: []
              }
              : { ...row, applies_to: null, max_open_sessions: null, open_sessions: null, leaving: [] },
            now
          )
        )
        return limits.length === 0 ? [] : [{ account, limits }]
      })

    /**
     * Every saved limit of the accounts, with its use (`used_usd`, or `open_sessions` for a
     * concurrency limit) and the bounds of its period holding `now` (null for a session limit),
     * its effective amount at `now`, in one statement for any number of accounts; an account
     * without limits is absent from the answer.
     */
    const findUsed = (accounts: ReadonlyArray<Account>, now: Date): Effect.Effect<ReadonlyArray<AccountLimits>> =>
      accounts.length === 0
        ? Effect.succeed([])
        : Effect.map(
          orDefect(usedLimits)({
            kinds: accounts.map((account) => account.kind),
            ids: accounts.map((account) => account.id),
            at: now
          }),
          accountLimitsOf(accounts, now)
        )

    /** The saved set's version and time of the accounts that have one (version 0, none saved, is absent). */
    const findSets = (accounts: ReadonlyArray<Account>): Effect.Effect<ReadonlyArray<LimitSet>> =>
      accounts.length === 0 ? Effect.succeed([]) : orDefect(limitSets)({
        kinds: accounts.map((account) => account.kind),
        ids: accounts.map((account) => account.id)
      })

    return { findUsed, findSets } as const
  })
}) {}
