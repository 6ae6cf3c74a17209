import { Schema } from "effect"
import { carriesLabel } from "./Labels.js"
import * as Money from "./Money.js"

/**
 * Spend limits (D16, docs/decisions/D16-spend-controls.md): what a limit governs and over which
 * period, and the one computation of a period's bounds, shared by the limits' reads (HTTP) and
 * the settlement transaction that enforces them.
 */

/**
 * What a limit governs: the whole account, one repository, one user, the sessions of one label
 * (D19), each session; or (D22) each user, each repository, each value of one label key, every
 * one of them separately against its own spend and sessions.
 */
export const LimitScope = Schema.Literal(
  "account",
  "repository",
  "user",
  "label",
  "session",
  "each_user",
  "each_repository",
  "each_label"
)
export type LimitScope = typeof LimitScope.Type
/** The scopes in order, for clients that offer them (the console's limits form). */
export const LIMIT_SCOPES: ReadonlyArray<LimitScope> = LimitScope.literals

/** The order limits are listed and judged in: the account's, a repository's, a user's, a label's (each one's default after its own), a session's. */
export const LIMIT_SCOPE_ORDER: ReadonlyArray<LimitScope> = [
  "account",
  "repository",
  "each_repository",
  "user",
  "each_user",
  "label",
  "each_label",
  "session"
]

/** The scopes that apply to each member of a kind (D22), and the scope that names one of them. */
export const EACH_SCOPES = { each_user: "user", each_repository: "repository", each_label: "label" } as const
export type EachScope = keyof typeof EACH_SCOPES
export const isEachScope = (scope: LimitScope): scope is EachScope => Object.hasOwn(EACH_SCOPES, scope)

/**
 * The period a limit counts over, in the account's time zone (D22): the clock hour, the day from
 * local midnight, the week from the account's first day, the month; `rolling`, the last
 * `window_minutes`; a session's whole life; or `concurrent`, a concurrency limit's (D19):
 * sessions open at once.
 */
export const LimitPeriod = Schema.Literal("hour", "day", "week", "month", "rolling", "session", "concurrent")
export type LimitPeriod = typeof LimitPeriod.Type
/** The periods in order, for clients that offer them. */
export const LIMIT_PERIODS: ReadonlyArray<LimitPeriod> = LimitPeriod.literals

/** A rolling window's bounds in minutes (D22). */
export const MIN_WINDOW_MINUTES = 5
export const MAX_WINDOW_MINUTES = 10_080

/** A temporary raise of a spend limit (D19): the amount it enforces until `until`, then its base again. */
export interface Raise {
  readonly amount_usd: Money.Decimal
  readonly until: Date
}

/** What a rolling limit's window holds by when it leaves (D22): spends leave `window_minutes` after their minute. */
export interface Leaving {
  /** When this spend is out of the window. */
  readonly at: Date
  readonly amount_usd: Money.Decimal
}

/** What every limit has, spend or concurrency. */
interface LimitIdentity {
  readonly id: string
  readonly scope: LimitScope
  /** The repository or user id, the label's `key=value`, or an `each_label` limit's key; null otherwise. */
  readonly scope_id: string | null
  /**
   * For an `each_` limit (D22) as it applies to one of its members: that user's or repository's
   * id, or the label's `key=value`; null for a limit of one scope, and for an `each_` limit as
   * saved (it applies to nobody in particular).
   */
  readonly applies_to: string | null
}

/** A saved spend limit with what it has used now (D16, D19, D22): the GET's answer and the enforcement's input alike. */
export interface UsedSpendLimit extends LimitIdentity {
  readonly kind: "spend"
  readonly period: Exclude<LimitPeriod, "concurrent">
  /** A rolling limit's window (D22); null for the others. */
  readonly window_minutes: number | null
  /** The base amount, as saved. */
  readonly amount_usd: Money.Decimal
  readonly raise: Raise | null
  /** What the limit enforces now: the raise's amount until its `until`, the base amount after. */
  readonly effective_amount_usd: Money.Decimal
  /**
   * Spends booked in the current period (a rolling limit: its window) by the sessions in scope
   * plus the holds they have open now; for a session limit, the largest held + spent of the open
   * sessions it governs. Zero for an `each_` limit as saved.
   */
  readonly used_usd: Money.Decimal
  /** Percentages of the effective amount whose first crossing a period announces (D19), ascending. */
  readonly warn_at_percent: ReadonlyArray<number>
  /** The period in force in the account's zone; null for rolling, session and concurrent. */
  readonly period_start: Date | null
  readonly period_end: Date | null
  /** A rolling limit's window spends by when they leave, soonest first; [] for the others. */
  readonly leaving: ReadonlyArray<Leaving>
}

/** A saved concurrency limit (D19) with the sessions in its scope open now. */
export interface UsedConcurrencyLimit extends LimitIdentity {
  readonly kind: "concurrent"
  readonly period: "concurrent"
  readonly window_minutes: null
  readonly max_open_sessions: number
  readonly open_sessions: number
}

export type UsedLimit = UsedSpendLimit | UsedConcurrencyLimit

/** What a raise leaves a limit enforcing at `now`: the raise's amount while it lasts. */
export const effectiveAmountAt = (amount: Money.Decimal, raise: Raise | null, now: Date): Money.Decimal =>
  raise !== null && raise.until.getTime() > now.getTime() ? raise.amount_usd : amount

/**
 * A saved limit as its columns hold it (`spend_limits`, with its use and period read beside it):
 * amounts and warnings for a spend limit, the bound and the sessions open for a concurrency
 * limit, null where they do not apply. The one mapping from a row to a limit, for the limits'
 * reads and the batch.
 */
export interface LimitColumns {
  readonly id: string
  readonly scope: LimitScope
  readonly scope_id: string | null
  readonly applies_to: string | null
  readonly period: LimitPeriod
  readonly window_minutes: number | null
  readonly amount_usd: Money.Decimal | null
  readonly used_usd: Money.Decimal | null
  readonly warn_at_percent: ReadonlyArray<number>
  readonly raise_amount_usd: Money.Decimal | null
  readonly raise_until: Date | null
  readonly max_open_sessions: number | null
  readonly open_sessions: number | null
  readonly period_start: Date | null
  readonly period_end: Date | null
  readonly leaving: ReadonlyArray<Leaving>
}

/** A limit from its columns, with its effective amount at `now`. */
export const usedLimitOfColumns = (row: LimitColumns, now: Date): UsedLimit => {
  const raise = row.raise_amount_usd === null || row.raise_until === null
    ? null
    : { amount_usd: row.raise_amount_usd, until: row.raise_until }
  return row.period === "concurrent" || row.amount_usd === null
    ? {
      kind: "concurrent",
      id: row.id,
      scope: row.scope,
      scope_id: row.scope_id,
      applies_to: row.applies_to,
      period: "concurrent",
      window_minutes: null,
      max_open_sessions: row.max_open_sessions ?? 0,
      open_sessions: row.open_sessions ?? 0
    }
    : {
      kind: "spend",
      id: row.id,
      scope: row.scope,
      scope_id: row.scope_id,
      applies_to: row.applies_to,
      period: row.period,
      window_minutes: row.window_minutes,
      amount_usd: row.amount_usd,
      used_usd: row.used_usd ?? Money.zero,
      raise,
      effective_amount_usd: effectiveAmountAt(row.amount_usd, raise, now),
      warn_at_percent: row.warn_at_percent,
      period_start: row.period_start,
      period_end: row.period_end,
      leaving: row.leaving
    }
}

/** A session's attribution (D16) and labels (D19): set by its first reserve, null and `{}` when none. */
export interface Attribution {
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly labels: Readonly<Record<string, string>>
}

/**
 * Whether a period or concurrency limit counts a session: an account limit counts every session,
 * a repository or user limit the sessions attributed to it, a label limit the sessions carrying
 * its label; an `each_` limit as it applies to one member, that member's sessions (D22). Session
 * limits are caps, not sums. (The database's counters by scope key, migration 0022, count by the
 * same rule.)
 */
export const countsSession = (
  limit: Pick<UsedLimit, "scope" | "scope_id" | "applies_to">,
  session: Attribution
): boolean => {
  switch (limit.scope) {
    case "account":
      return true
    case "repository":
      return session.repository_id !== null && limit.scope_id === session.repository_id
    case "user":
      return session.user_id !== null && limit.scope_id === session.user_id
    case "label":
      return limit.scope_id !== null && carriesLabel(session.labels, limit.scope_id)
    case "each_repository":
      return session.repository_id !== null && limit.applies_to === session.repository_id
    case "each_user":
      return session.user_id !== null && limit.applies_to === session.user_id
    case "each_label":
      return limit.applies_to !== null && carriesLabel(session.labels, limit.applies_to)
    case "session":
      return false
  }
}

/** Whether two limits count over the same period: the same kind, and for rolling ones the same window. */
const samePeriod = (a: UsedLimit, b: UsedLimit) => a.period === b.period && a.window_minutes === b.window_minutes

/**
 * The limits that apply (D22): an `each_` limit as it applies to one member gives way to a limit
 * of that member's own scope of the same period (`user` for `each_user`, `repository`, `label`
 * `key=value`), higher or lower: the most specific wins. An `each_` limit as saved, applying to
 * nobody, is left out too.
 */
export const applicable = (limits: ReadonlyArray<UsedLimit>): ReadonlyArray<UsedLimit> =>
  limits.filter((limit) => {
    if (!isEachScope(limit.scope)) return true
    if (limit.applies_to === null) return false
    const own = EACH_SCOPES[limit.scope]
    return !limits.some((other) =>
      other.scope === own && other.scope_id === limit.applies_to && samePeriod(other, limit)
    )
  })

/** A limit as it applies to one member, for the use kept per member and period: `id` or `id/member`. */
export const limitKey = (limit: Pick<UsedLimit, "id" | "applies_to">): string =>
  limit.applies_to === null ? limit.id : `${limit.id}/${limit.applies_to}`
