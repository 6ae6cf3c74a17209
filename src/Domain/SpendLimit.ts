import { Schema } from "effect"
import type * as Money from "./Money.js"

/**
 * Spend limits (D16, docs/decisions/D16-spend-controls.md): what a limit governs and over which
 * period, and the one computation of a period's bounds, shared by the limits' reads (HTTP) and
 * the settlement transaction that enforces them.
 */

/** What a limit governs: the whole account, one repository, one user, or each session. */
export const LimitScope = Schema.Literal("account", "repository", "user", "session")
export type LimitScope = typeof LimitScope.Type
/** The scopes in order, for clients that offer them (the console's limits form). */
export const LIMIT_SCOPES: ReadonlyArray<LimitScope> = LimitScope.literals

/** The period a limit counts over: UTC calendar day, ISO week from Monday, calendar month; a session's whole life. */
export const LimitPeriod = Schema.Literal("day", "week", "month", "session")
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
      return null
  }
}

/** A UTC date as `YYYY-MM-DD`: how a period's bounds meet the running totals' `day`. */
export const utcDay = (date: Date): string => date.toISOString().slice(0, 10)

/** A saved limit with what it has used now (D16): the GET's answer and the enforcement's input alike. */
export interface UsedLimit {
  readonly id: string
  readonly scope: LimitScope
  /** The repository or user; null for account and session. */
  readonly scope_id: string | null
  readonly period: LimitPeriod
  readonly amount_usd: Money.Decimal
  /**
   * Spends booked in the current period by the sessions in scope plus the holds they have open
   * now; for a session limit, the largest held + spent of the open sessions it governs.
   */
  readonly used_usd: Money.Decimal
  readonly period_start: Date | null
  readonly period_end: Date | null
}

/** A saved limit with its use, in the bounds of its period that holds `now` (none for a session limit). */
export const usedLimitAt = (
  limit: Omit<UsedLimit, "period_start" | "period_end">,
  now: Date
): UsedLimit => {
  const period = periodOf(limit.period, now)
  return { ...limit, period_start: period?.start ?? null, period_end: period?.end ?? null }
}

/** A session's attribution (D16): set by its first reserve, null when unattributed. */
export interface Attribution {
  readonly repository_id: string | null
  readonly user_id: string | null
}

/**
 * Whether a period limit counts a session's money: an account limit counts every session, a
 * repository or user limit the sessions attributed to it. Session limits are caps, not sums.
 */
export const countsSession = (limit: Pick<UsedLimit, "scope" | "scope_id">, session: Attribution): boolean => {
  switch (limit.scope) {
    case "account":
      return true
    case "repository":
      return session.repository_id !== null && limit.scope_id === session.repository_id
    case "user":
      return session.user_id !== null && limit.scope_id === session.user_id
    case "session":
      return false
  }
}
