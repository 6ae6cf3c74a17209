import { DateTime } from "effect"
import { isUuid } from "../Domain/Account.js"
import { FieldError } from "../Domain/Errors.js"
import { labelKeyProblem, labelScopeIdProblem } from "../Domain/Labels.js"
import {
  raiseAmountProblem,
  raiseUntilProblem,
  type SavedLimit,
  type SpendLimitInput,
  SpendLimitRecord
} from "../Domain/Spend.js"
import {
  isEachScope,
  LIMIT_SCOPE_ORDER,
  type LimitPeriod,
  type LimitScope,
  type UsedLimit
} from "../Domain/SpendLimit.js"
import { inZone } from "../Domain/Time.js"

/**
 * The limits' rules that need no database (D16, D19, docs/decisions/D19-fleet-controls.md): what
 * a PUT's list may hold, how limits are listed, and a limit as the GET and `limits.updated` show
 * it. The service (src/SpendControls.ts) checks the rest (the repositories and users named, the
 * version) and writes.
 */

/** Rows are decoded already, so the records are built without validating them twice. */
const trusted = { disableValidation: true } as const

/** Scopes whose limits name what they govern in `scope_id` (an `each_label` limit: its label key). */
const NAMED_SCOPES: ReadonlyArray<LimitScope> = ["repository", "user", "label", "each_label"]
const isNamed = (scope: LimitScope) => NAMED_SCOPES.includes(scope)

/** A scope id as stored: ids in lower case, as PostgreSQL answers them; a label exactly as sent. */
export const storedScopeId = (limit: SpendLimitInput): string | null => {
  const scopeId = limit.scope_id ?? null
  return scopeId === null || limit.scope === "label" || limit.scope === "each_label" ? scopeId : scopeId.toLowerCase()
}

/** What a limit is, for duplicates: scope, scope id as stored, period and a rolling limit's window. */
const identityOf = (limit: SpendLimitInput) =>
  `${limit.scope}/${storedScopeId(limit) ?? ""}/${limit.period}/${limit.window_minutes ?? ""}`

const PERIOD_ORDER: ReadonlyArray<LimitPeriod> = ["hour", "day", "week", "month", "rolling", "concurrent", "session"]

/** Strings by their UTF-16 code units: the same order in every locale (labels differ by case). */
const byCodeUnits = (a: string, b: string) => a < b ? -1 : a > b ? 1 : 0

/**
 * The order limits are listed in, whatever order they were sent or saved in: by scope (account,
 * repository, user, label, session), then period (day, week, month, concurrent), then scope id.
 */
export const listingOrder = (a: UsedLimit, b: UsedLimit) =>
  LIMIT_SCOPE_ORDER.indexOf(a.scope) - LIMIT_SCOPE_ORDER.indexOf(b.scope) ||
  PERIOD_ORDER.indexOf(a.period) - PERIOD_ORDER.indexOf(b.period) ||
  (a.window_minutes ?? 0) - (b.window_minutes ?? 0) ||
  byCodeUnits(a.scope_id ?? "", b.scope_id ?? "")

/** Why a scope id does not name what its scope governs, or undefined. */
const scopeIdProblem = (scope: LimitScope, scopeId: string): string | undefined => {
  if (scope === "repository" || scope === "user") {
    return isUuid(scopeId) ? undefined : `must be a UUID (the ${scope}'s id) for a ${scope} limit`
  }
  if (scope === "each_label") {
    const problem = labelKeyProblem(scopeId)
    return problem === undefined ? undefined : `must be a label key for an each_label limit: it ${problem}`
  }
  return scope === "label" ? labelScopeIdProblem(scopeId) : undefined
}

const aLimit = (scope: LimitScope) => `a${scope === "account" || scope.startsWith("each") ? "n" : ""} ${scope} limit`

/**
 * The rules a list breaks on its own (D16, D19), each at the field that breaks it: a scope id
 * where the scope takes one and only there, of the scope's form; `session` as the period of
 * session limits and of them only; an amount for a spend limit and a bound of open sessions for
 * a concurrency limit, each only there, and warnings and a raise only on a spend limit; a raise
 * above the amount, ending in the future but within 90 days of `now`; no two limits of the same
 * scope, scope id and period.
 */
export const ruleErrors = (limits: ReadonlyArray<SpendLimitInput>, now: DateTime.Utc): Array<FieldError> => {
  const errors: Array<FieldError> = []
  const seen = new Map<string, number>()
  limits.forEach((limit, i) => {
    const at = (field: string, detail: string) =>
      errors.push(new FieldError({ pointer: `#/limits/${i}${field}`, detail }))
    const scopeId = limit.scope_id ?? null
    if (isNamed(limit.scope) && scopeId === null) at("/scope_id", `is required for ${aLimit(limit.scope)}`)
    if (!isNamed(limit.scope) && scopeId !== null) at("/scope_id", `must be null for ${aLimit(limit.scope)}`)
    const problem = scopeId === null ? undefined : scopeIdProblem(limit.scope, scopeId)
    if (problem !== undefined) at("/scope_id", problem)
    if (limit.scope === "session" && limit.period !== "session") at("/period", "must be session for a session limit")
    if (limit.scope !== "session" && limit.period === "session") {
      at("/period", `must be hour, day, week, month, rolling or concurrent for ${aLimit(limit.scope)}`)
    }
    if (limit.period === "rolling" && limit.window_minutes === undefined) {
      at("/window_minutes", "is required for a rolling limit")
    }
    if (limit.period !== "rolling" && limit.window_minutes !== undefined) {
      at("/window_minutes", "is only for a rolling limit")
    }
    // A rolling window has no period whose first crossing could be announced once (D22).
    if (limit.period === "rolling" && (limit.warn_at_percent ?? []).length > 0) {
      at("/warn_at_percent", "is not for a rolling limit (its window has no period to warn once in)")
    }
    const { amount_usd: amount, raise } = limit
    if (limit.period === "concurrent") {
      if (amount !== undefined) {
        at("/amount_usd", "must be absent for a concurrent limit (it counts sessions, not money)")
      }
      if (limit.max_open_sessions === undefined) at("/max_open_sessions", "is required for a concurrent limit")
      // [] is "none", as the GET shows a concurrent limit's.
      if ((limit.warn_at_percent ?? []).length > 0) at("/warn_at_percent", "is only for a spend limit")
      if (raise !== undefined) at("/raise", "is only for a spend limit")
    } else {
      if (amount === undefined) at("/amount_usd", `is required for a ${limit.period} limit`)
      if (limit.max_open_sessions !== undefined) at("/max_open_sessions", "is only for a concurrent limit")
      if (raise !== undefined) {
        const amountProblem = amount === undefined ? undefined : raiseAmountProblem(raise.amount_usd, amount)
        if (amountProblem !== undefined) at("/raise/amount_usd", amountProblem)
        const untilProblem = raiseUntilProblem(raise.until, now)
        if (untilProblem !== undefined) at("/raise/until", untilProblem)
      }
    }
    const identity = identityOf(limit)
    const first = seen.get(identity)
    if (first === undefined) seen.set(identity, i)
    else at("", `repeats the scope, scope_id and period of #/limits/${first}`)
  })
  return errors
}

/** A limit as the GET shows it: every key present, null where it does not apply to its kind; bounds in `timeZone`. */
export const recordOf = (timeZone: string) => (limit: UsedLimit): SpendLimitRecord =>
  new SpendLimitRecord(
    limit.kind === "concurrent"
      ? {
        id: limit.id,
        scope: limit.scope,
        scope_id: limit.scope_id,
        period: limit.period,
        window_minutes: null,
        amount_usd: null,
        effective_amount_usd: null,
        used_usd: null,
        warn_at_percent: [],
        raise: null,
        max_open_sessions: limit.max_open_sessions,
        open_sessions: isEachScope(limit.scope) && limit.applies_to === null ? null : limit.open_sessions,
        period_start: null,
        period_end: null
      }
      : {
        id: limit.id,
        scope: limit.scope,
        scope_id: limit.scope_id,
        period: limit.period,
        window_minutes: limit.window_minutes,
        amount_usd: limit.amount_usd,
        effective_amount_usd: limit.effective_amount_usd,
        used_usd: isEachScope(limit.scope) && limit.applies_to === null ? null : limit.used_usd,
        warn_at_percent: limit.warn_at_percent,
        raise: limit.raise === null
          ? null
          : { amount_usd: limit.raise.amount_usd, until: DateTime.unsafeFromDate(limit.raise.until) },
        max_open_sessions: null,
        open_sessions: null,
        period_start: limit.period_start === null ? null : inZone(limit.period_start, timeZone),
        period_end: limit.period_end === null ? null : inZone(limit.period_end, timeZone)
      },
    trusted
  )

/** A limit as `limits.updated` lists it (D19): the record without its use. */
export const savedOf = (record: SpendLimitRecord): SavedLimit => ({
  id: record.id,
  scope: record.scope,
  scope_id: record.scope_id,
  period: record.period,
  window_minutes: record.window_minutes,
  amount_usd: record.amount_usd,
  warn_at_percent: record.warn_at_percent,
  raise: record.raise,
  max_open_sessions: record.max_open_sessions
})
