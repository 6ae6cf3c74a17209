import { Schema } from "effect"
import { carriesLabel } from "./Labels.js"
import * as Money from "./Money.js"

/**
 * Spend limits (D16, docs/decisions/D16-spend-controls.md): what a limit governs and over which
 * period, and the one computation of a period's bounds, shared by the limits' reads (HTTP) and
 * the settlement transaction that enforces them.
 */

/** What a limit governs: the whole account, one repository, one user, the sessions of one label (D19), or each session. */
export const LimitScope = Schema.Literal("account", "repository", "user", "label", "session")
export type LimitScope = typeof LimitScope.Type
/** The scopes in order, for clients that offer them (the console's limits form). */
export const LIMIT_SCOPES: ReadonlyArray<LimitScope> = LimitScope.literals

/**
 * The period a limit counts over: UTC calendar day, ISO week from Monday, calendar month; a
 * session's whole life; or `concurrent`, a concurrency limit's (D19): sessions open at once.
 */
export const LimitPeriod = Schema.Literal("day", "week", "month", "session", "concurrent")
export type LimitPeriod = typeof LimitPeriod.Type
/** The periods in order, for clients that offer them. */
export const LIMIT_PERIODS: ReadonlyArray<LimitPeriod> = LimitPeriod.literals

/** A period's bounds: `start` inclusive, `end` exclusive, both at UTC midnight. */
export interface PeriodBounds {
  readonly start: Date
  readonly end: Date
}

const DAY_MS = 86_400_000

/**
 * The period of `period` that holds `now` (UTC, D16); null for `session`, which has no
 * calendar bounds. Pure, so the read and the enforcement count the same days.
 */
export const periodOf = (period: LimitPeriod, now: Date): PeriodBounds | null => {
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())
  switch (period) {
    case "day":
      return { start: new Date(midnight), end: new Date(midnight + DAY_MS) }
    case "week": {
      // getUTCDay counts from Sunday (0); an ISO week starts on Monday.
      const sinceMonday = (now.getUTCDay() + 6) % 7
      const start = midnight - sinceMonday * DAY_MS
      return { start: new Date(start), end: new Date(start + 7 * DAY_MS) }
    }
    case "month":
      return {
        start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
        end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
      }
    case "session":
    case "concurrent":
      return null
  }
}

/** A UTC date as `YYYY-MM-DD`: how a period's bounds meet the running totals' `day`. */
export const utcDay = (date: Date): string => date.toISOString().slice(0, 10)

/** A temporary raise of a spend limit (D19): the amount it enforces until `until`, then its base again. */
export interface Raise {
  readonly amount_usd: Money.Decimal
  readonly until: Date
}

/** A saved spend limit with what it has used now (D16, D19): the GET's answer and the enforcement's input alike. */
export interface UsedSpendLimit {
  readonly kind: "spend"
  readonly id: string
  readonly scope: LimitScope
  /** The repository or user id, or the label's `key=value`; null for account and session. */
  readonly scope_id: string | null
  readonly period: LimitPeriod
  /** The base amount, as saved. */
  readonly amount_usd: Money.Decimal
  readonly raise: Raise | null
  /** What the limit enforces now: the raise's amount until its `until`, the base amount after. */
  readonly effective_amount_usd: Money.Decimal
  /**
   * Spends booked in the current period by the sessions in scope plus the holds they have open
   * now; for a session limit, the largest held + spent of the open sessions it governs.
   */
  readonly used_usd: Money.Decimal
  /** Percentages of the effective amount whose first crossing a period announces (D19), ascending. */
  readonly warn_at_percent: ReadonlyArray<number>
  readonly period_start: Date | null
  readonly period_end: Date | null
}

/** A saved concurrency limit (D19) with the sessions in its scope open now. */
export interface UsedConcurrencyLimit {
  readonly kind: "concurrent"
  readonly id: string
  readonly scope: LimitScope
  readonly scope_id: string | null
  readonly period: "concurrent"
  readonly max_open_sessions: number
  readonly open_sessions: number
}

export type UsedLimit = UsedSpendLimit | UsedConcurrencyLimit

/** What a raise leaves a limit enforcing at `now`: the raise's amount while it lasts. */
export const effectiveAmountAt = (amount: Money.Decimal, raise: Raise | null, now: Date): Money.Decimal =>
  raise !== null && raise.until.getTime() > now.getTime() ? raise.amount_usd : amount

/** A saved limit as read, with its effective amount and the bounds of its period that hold `now`. */
export const usedLimitAt = (
  limit:
    | Omit<UsedSpendLimit, "period_start" | "period_end" | "effective_amount_usd">
    | UsedConcurrencyLimit,
  now: Date
): UsedLimit => {
  if (limit.kind === "concurrent") return limit
  const period = periodOf(limit.period, now)
  return {
    ...limit,
    effective_amount_usd: effectiveAmountAt(limit.amount_usd, limit.raise, now),
    period_start: period?.start ?? null,
    period_end: period?.end ?? null
  }
}

/**
 * A saved limit as its columns hold it (`spend_limits`, with its use read beside it): amounts and
 * warnings for a spend limit, the bound and the sessions open for a concurrency limit, null where
 * they do not apply. The one mapping from a row to a limit, for the limits' GET and the batch.
 */
export interface LimitColumns {
  readonly id: string
  readonly scope: LimitScope
  readonly scope_id: string | null
  readonly period: LimitPeriod
  readonly amount_usd: Money.Decimal | null
  readonly used_usd: Money.Decimal | null
  readonly warn_at_percent: ReadonlyArray<number>
  readonly raise_amount_usd: Money.Decimal | null
  readonly raise_until: Date | null
  readonly max_open_sessions: number | null
  readonly open_sessions: number | null
}

/** A limit from its columns, with its effective amount at `now` and its period's bounds. */
export const usedLimitOfColumns = (row: LimitColumns, now: Date): UsedLimit =>
  usedLimitAt(
    row.period === "concurrent" || row.amount_usd === null
      ? {
        kind: "concurrent",
        id: row.id,
        scope: row.scope,
        scope_id: row.scope_id,
        period: "concurrent",
        max_open_sessions: row.max_open_sessions ?? 0,
        open_sessions: row.open_sessions ?? 0
      }
      : {
        kind: "spend",
        id: row.id,
        scope: row.scope,
        scope_id: row.scope_id,
        period: row.period,
        amount_usd: row.amount_usd,
        used_usd: row.used_usd ?? Money.zero,
        raise: row.raise_amount_usd === null || row.raise_until === null
          ? null
          : { amount_usd: row.raise_amount_usd, until: row.raise_until },
        warn_at_percent: row.warn_at_percent
      },
    now
  )

/** A session's attribution (D16) and labels (D19): set by its first reserve, null and `{}` when none. */
export interface Attribution {
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly labels: Readonly<Record<string, string>>
}

/**
 * Whether a period or concurrency limit counts a session: an account limit counts every session,
 * a repository or user limit the sessions attributed to it, a label limit the sessions carrying
 * its label. Session limits are caps, not sums. (The database's `spend_limit_in_scope`, migration
 * 0020, is the same rule for the reads.)
 */
export const countsSession = (limit: Pick<UsedLimit, "scope" | "scope_id">, session: Attribution): boolean => {
  switch (limit.scope) {
    case "account":
      return true
    case "repository":
      return session.repository_id !== null && limit.scope_id === session.repository_id
    case "user":
      return session.user_id !== null && limit.scope_id === session.user_id
    case "label":
      return limit.scope_id !== null && carriesLabel(session.labels, limit.scope_id)
    case "session":
      return false
  }
}
