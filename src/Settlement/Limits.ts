import * as Money from "../Domain/Money.js"
import type { ConcurrencyLimitHit, SessionState, SpendLimitHit } from "../Domain/SettlementSession.js"
import {
  countsSession,
  LIMIT_SCOPE_ORDER,
  limitKey,
  type UsedConcurrencyLimit,
  type UsedLimit,
  type UsedSpendLimit
} from "../Domain/SpendLimit.js"

/**
 * One wallet's limits as a batch's plan moves them (D16, D19): each spend limit's use, each
 * concurrency limit's open sessions, and what their periods have announced. The plan tells it
 * what it books, in arrival order; it answers which limit a reserve would pass, how much a
 * refused reserve could have taken, and notices the crossings the batch announces. Pure.
 */

/** What the limits notice, in the order the plan booked it. */
export type LimitNotice =
  | { readonly _tag: "LimitReached"; readonly limit: SpendLimitHit; readonly period_start: Date }
  | {
    readonly _tag: "LimitApproaching"
    readonly limit: SpendLimitHit
    readonly percent: number
    /** The period's first day; null for a session limit's warning, which is once per session. */
    readonly period_start: Date | null
    readonly session_id: string | null
  }

/** The percentage `limit.reached` is announced under, beside the warnings' (D17, D19). */
export const REACHED_PERCENT = 100

/** An announcement's key: a limit (as it applies to one member, D22) and a percentage of its current period. */
export const announcementKey = (key: string, percent: number) => `${key}/${percent}`

/**
 * Whether a session counts against concurrency limits (D19): open from its first applied reserve
 * until it closes. An applied reserve leaves money held or spent, a refused one neither; the
 * database's open-session counters by scope key (migration 0022, written by the transition) count by the same rule.
 */
export const isOpenSession = (session: SessionState): boolean =>
  session.state === "open" && (session.held.gt(0) || session.spent.gt(0))

/** The lower of two caps, either of which may be absent. */
export const lowerCap = (a: Money.Decimal | null, b: Money.Decimal | null) =>
  a === null ? b : b === null || a.lt(b) ? a : b

const hitOf = (limit: UsedSpendLimit, used: Money.Decimal, retryAfter: number | null = null): SpendLimitHit => ({
  kind: "spend",
  id: limit.id,
  scope: limit.scope,
  scope_id: limit.scope_id,
  applies_to: limit.applies_to,
  period: limit.period,
  window_minutes: limit.window_minutes,
  amount_usd: limit.effective_amount_usd,
  used_usd: used,
  retry_after_seconds: retryAfter
})

/**
 * When a reserve of `amount` refused by a rolling limit would fit (D22), in whole seconds from
 * `now`: as its window's spends leave, soonest first, what stays (the rest of its use being
 * holds) plus the reserve at most its amount. Null when it never would: the reserve alone is
 * above the amount, or the holds alone leave no room for it.
 */
export const retryAfterSeconds = (
  limit: UsedSpendLimit,
  used: Money.Decimal,
  amount: Money.Decimal,
  now: Date
): number | null => {
  let staying = used
  for (const spend of limit.leaving) {
    staying = staying.minus(spend.amount_usd)
    if (staying.plus(amount).lte(limit.effective_amount_usd)) {
      return Math.max(1, Math.ceil((spend.at.getTime() - now.getTime()) / 1000))
    }
  }
  return null
}

/** The order a reserve's limits are judged in, the order they are listed in: the account's, then a repository's, a user's, a label's. */
const byScope = (a: UsedLimit, b: UsedLimit) => LIMIT_SCOPE_ORDER.indexOf(a.scope) - LIMIT_SCOPE_ORDER.indexOf(b.scope)

export const makeLimitBook = (
  limits: ReadonlyArray<UsedLimit>,
  announcedBefore: ReadonlySet<string>,
  notify: (notice: LimitNotice) => void,
  /** The batch's time, every rolling window's retry is counted from. */
  time: Date
) => {
  const spendLimits = limits.filter((limit): limit is UsedSpendLimit => limit.kind === "spend")
  // The account's session limit caps every session, beside a session's own `max_usd` (D16).
  const sessionLimits = spendLimits.filter((limit) => limit.scope === "session")
  const periodLimits = spendLimits
    .filter((limit) => limit.scope !== "session")
    .sort(byScope)
  const concurrencyLimits = limits
    .filter((limit): limit is UsedConcurrencyLimit => limit.kind === "concurrent")
    .sort(byScope)
  const used = new Map(periodLimits.map((limit) => [limitKey(limit), limit.used_usd]))
  const open = new Map(concurrencyLimits.map((limit) => [limitKey(limit), limit.open_sessions]))
  const announced = new Set(announcedBefore)

  const usedOf = (limit: UsedSpendLimit) => used.get(limitKey(limit)) ?? Money.zero

  /** Announces a period's crossing once per limit (and member), percentage and period; a rolling limit has none. */
  const announce = (limit: UsedSpendLimit, percent: number, now: Money.Decimal) => {
    const key = announcementKey(limitKey(limit), percent)
    if (announced.has(key) || limit.period_start === null) return
    announced.add(key)
    notify(
      percent === REACHED_PERCENT
        ? { _tag: "LimitReached", limit: hitOf(limit, now), period_start: limit.period_start }
        : {
          _tag: "LimitApproaching",
          limit: hitOf(limit, now),
          percent,
          period_start: limit.period_start,
          session_id: null
        }
    )
  }

  /** Each spend limit's warnings as the use that reaches them: a percentage of its effective amount. */
  const warnings = new Map(spendLimits.map((limit) => [
    limit.id,
    limit.warn_at_percent.map((percent) => ({
      percent,
      at: limit.effective_amount_usd.times(percent).dividedBy(100)
    }))
  ]))
  const warningsOf = (limit: UsedSpendLimit) => warnings.get(limit.id) ?? []

  /**
   * A period limit's use moves by `amount` (a reserve adds its amount, a spend what it takes
   * beyond its hold, a release what it returns); a rise announces each warning it reaches, then
   * the limit reached (D17, D19).
   */
  const add = (session: SessionState, amount: Money.Decimal) => {
    if (amount.isZero()) return
    for (const limit of periodLimits) {
      if (!countsSession(limit, session)) continue
      const now = usedOf(limit).plus(amount)
      used.set(limitKey(limit), now)
      if (amount.lt(0)) continue
      for (const { at, percent } of warningsOf(limit)) {
        if (now.gte(at)) announce(limit, percent, now)
      }
      if (now.gte(limit.effective_amount_usd)) announce(limit, REACHED_PERCENT, now)
    }
  }

  /** A reserve refused by a saved spend limit announces it reached (D17), once per period. */
  const refusedBy = (hit: SpendLimitHit) => {
    const limit = periodLimits.find((saved) => saved.id === hit.id && saved.applies_to === hit.applies_to)
    if (limit !== undefined) announce(limit, REACHED_PERCENT, usedOf(limit))
  }

  /** A session starts or stops counting against the concurrency limits in its scope. */
  const openChanged = (before: SessionState | undefined, after: SessionState) => {
    const was = before !== undefined && isOpenSession(before)
    const is = isOpenSession(after)
    if (was === is) return
    for (const limit of concurrencyLimits) {
      if (countsSession(limit, after)) open.set(limitKey(limit), (open.get(limitKey(limit)) ?? 0) + (is ? 1 : -1))
    }
  }

  /** The concurrency limit full for a session that is not open yet, if any: such a session may not open (D19). */
  const fullFor = (session: SessionState): ConcurrencyLimitHit | undefined => {
    if (isOpenSession(session)) return undefined
    for (const limit of concurrencyLimits) {
      const count = open.get(limitKey(limit)) ?? 0
      if (countsSession(limit, session) && count >= limit.max_open_sessions) return { ...limit, open_sessions: count }
    }
    return undefined
  }

  /** The most a session may hold plus spend: the lower of its own cap and the account's session limits. */
  const capOf = (session: SessionState) =>
    sessionLimits.reduce<Money.Decimal | null>(
      (cap, limit) => lowerCap(cap, limit.effective_amount_usd),
      session.max_usd
    )

  /**
   * The first limit a reserve of `amount` would pass: a concurrency limit the session may not
   * open under, the session's caps, then the account's, repository's, user's and label's.
   */
  const passed = (session: SessionState, amount: Money.Decimal): ConcurrencyLimitHit | SpendLimitHit | undefined => {
    const full = fullFor(session)
    if (full !== undefined) return full
    const sessionUsed = session.held.plus(session.spent)
    if (session.max_usd !== null && sessionUsed.plus(amount).gt(session.max_usd)) {
      return {
        kind: "spend",
        id: null,
        scope: "session",
        scope_id: null,
        applies_to: null,
        period: "session",
        window_minutes: null,
        amount_usd: session.max_usd,
        used_usd: sessionUsed,
        retry_after_seconds: null
      }
    }
    for (const limit of sessionLimits) {
      if (sessionUsed.plus(amount).gt(limit.effective_amount_usd)) return hitOf(limit, sessionUsed)
    }
    for (const limit of periodLimits) {
      if (!countsSession(limit, session)) continue
      const limitUsed = usedOf(limit)
      if (limitUsed.plus(amount).gt(limit.effective_amount_usd)) {
        return hitOf(
          limit,
          limitUsed,
          limit.period === "rolling" ? retryAfterSeconds(limit, limitUsed, amount, time) : null
        )
      }
    }
    return undefined
  }

  /** The largest reserve the limits leave a session now (D19); null when none bounds it. */
  const headroom = (session: SessionState): Money.Decimal | null => {
    if (fullFor(session) !== undefined) return Money.zero
    const sessionUsed = session.held.plus(session.spent)
    const cap = capOf(session)
    let most = cap === null ? null : cap.minus(sessionUsed)
    for (const limit of periodLimits) {
      if (countsSession(limit, session)) most = lowerCap(most, limit.effective_amount_usd.minus(usedOf(limit)))
    }
    return most
  }

  /**
   * A session limit's warnings (D19), once per session and percentage: the session as it should
   * be written, its `warned_percent` raised to the highest it reached.
   */
  const warnSession = (session: SessionState): SessionState => {
    const sessionUsed = session.held.plus(session.spent)
    let warned = session.warned_percent
    for (const limit of sessionLimits) {
      for (const { at, percent } of warningsOf(limit)) {
        if (percent <= warned || sessionUsed.lt(at)) continue
        warned = percent
        notify({
          _tag: "LimitApproaching",
          limit: hitOf(limit, sessionUsed),
          percent,
          period_start: null,
          session_id: session.session_id
        })
      }
    }
    return warned === session.warned_percent ? session : { ...session, warned_percent: warned }
  }

  return { add, refusedBy, openChanged, passed, headroom, capOf, warnSession } as const
}
