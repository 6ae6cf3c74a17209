import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import { Accounts } from "./Accounts.js"
import { type Account, accountKey, isUuid } from "./Domain/Account.js"
import { FieldError, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import { labelKeyProblem, labelValueProblem } from "./Domain/Labels.js"
import * as Money from "./Domain/Money.js"
import { MAX_RAISE_DAYS, type SavedLimit, type SpendLimitInput, SpendLimitRecord, SpendLimits } from "./Domain/Spend.js"
import type { LimitPeriod, LimitScope, UsedLimit } from "./Domain/SpendLimit.js"
import { Events } from "./Events.js"
import { SpendLimitsRepo } from "./SpendControls/LimitsRepo.js"
import { LimitsWriteRepo } from "./SpendControls/LimitsWriteRepo.js"
import { inTransaction } from "./Sql/Errors.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

/** Scopes whose limits name what they govern in `scope_id`. */
const NAMED_SCOPES: ReadonlyArray<LimitScope> = ["repository", "user", "label"]
const isNamed = (scope: LimitScope) => NAMED_SCOPES.includes(scope)

/** A scope id as stored: ids in lower case, as PostgreSQL answers them; a label exactly as sent. */
const storedScopeId = (limit: SpendLimitInput): string | null => {
  const scopeId = limit.scope_id ?? null
  return scopeId === null || limit.scope === "label" ? scopeId : scopeId.toLowerCase()
}

/** What a limit is, for duplicates: scope, scope id as stored, period. */
const identityOf = (limit: SpendLimitInput) => `${limit.scope}/${storedScopeId(limit) ?? ""}/${limit.period}`

const SCOPE_ORDER: ReadonlyArray<LimitScope> = ["account", "repository", "user", "label", "session"]
const PERIOD_ORDER: ReadonlyArray<LimitPeriod> = ["day", "week", "month", "concurrent", "session"]

/** Strings by their UTF-16 code units: the same order in every locale (labels differ by case). */
const byCodeUnits = (a: string, b: string) => a < b ? -1 : a > b ? 1 : 0

/**
 * The order limits are listed in, whatever order they were sent or saved in: by scope (account,
 * repository, user, label, session), then period (day, week, month, concurrent), then scope id.
 */
const listingOrder = (a: UsedLimit, b: UsedLimit) =>
  SCOPE_ORDER.indexOf(a.scope) - SCOPE_ORDER.indexOf(b.scope) ||
  PERIOD_ORDER.indexOf(a.period) - PERIOD_ORDER.indexOf(b.period) ||
  byCodeUnits(a.scope_id ?? "", b.scope_id ?? "")

/** Why a scope id does not name what its scope governs, or undefined. */
const scopeIdProblem = (scope: LimitScope, scopeId: string): string | undefined => {
  if (scope === "repository" || scope === "user") {
    return isUuid(scopeId) ? undefined : `must be a UUID (the ${scope}'s id) for a ${scope} limit`
  }
  if (scope !== "label") return undefined
  const at = scopeId.indexOf("=")
  if (at < 0) return "must be the label as key=value for a label limit"
  const keyProblem = labelKeyProblem(scopeId.slice(0, at))
  if (keyProblem !== undefined) return `must be key=value, and the key ${keyProblem}`
  const valueProblem = labelValueProblem(scopeId.slice(at + 1))
  return valueProblem === undefined ? undefined : `must be key=value, and the value ${valueProblem}`
}

/** An optional field of the PUT as a column's value: null when absent. */
const optional = <A, B>(value: A | undefined, f: (value: A) => B): B | null => value === undefined ? null : f(value)

const aLimit = (scope: LimitScope) => `a${scope === "account" ? "n" : ""} ${scope} limit`

/**
 * The rules a list breaks on its own (D16, D19), each at the field that breaks it: a scope id
 * where the scope takes one and only there, of the scope's form; `session` as the period of
 * session limits and of them only; an amount for a spend limit and a bound of open sessions for
 * a concurrency limit, each only there, and warnings and a raise only on a spend limit; a raise
 * above the amount, ending in the future but within 90 days of `now`; no two limits of the same
 * scope, scope id and period.
 */
const ruleErrors = (limits: ReadonlyArray<SpendLimitInput>, now: DateTime.Utc): Array<FieldError> => {
  const errors: Array<FieldError> = []
  const seen = new Map<string, number>()
  const latest = DateTime.add(now, { days: MAX_RAISE_DAYS })
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
      at("/period", `must be day, week, month or concurrent for ${aLimit(limit.scope)}`)
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
        if (amount !== undefined && raise.amount_usd.lte(amount)) {
          at("/raise/amount_usd", `must be above the limit's amount_usd (${Money.format(amount)})`)
        }
        if (!DateTime.greaterThan(raise.until, now)) at("/raise/until", "must be in the future")
        else if (DateTime.greaterThan(raise.until, latest)) {
          at("/raise/until", `must be at most ${MAX_RAISE_DAYS} days ahead`)
        }
      }
    }
    const identity = identityOf(limit)
    const first = seen.get(identity)
    if (first === undefined) seen.set(identity, i)
    else at("", `repeats the scope, scope_id and period of #/limits/${first}`)
  })
  return errors
}

/** A limit as the GET shows it: every key present, null where it does not apply to its kind. */
const recordOf = (limit: UsedLimit): SpendLimitRecord =>
  new SpendLimitRecord(
    limit.kind === "concurrent"
      ? {
        id: limit.id,
        scope: limit.scope,
        scope_id: limit.scope_id,
        period: limit.period,
        amount_usd: null,
        effective_amount_usd: null,
        used_usd: null,
        warn_at_percent: [],
        raise: null,
        max_open_sessions: limit.max_open_sessions,
        open_sessions: limit.open_sessions,
        period_start: null,
        period_end: null
      }
      : {
        id: limit.id,
        scope: limit.scope,
        scope_id: limit.scope_id,
        period: limit.period,
        amount_usd: limit.amount_usd,
        effective_amount_usd: limit.effective_amount_usd,
        used_usd: limit.used_usd,
        warn_at_percent: limit.warn_at_percent,
        raise: limit.raise === null
          ? null
          : { amount_usd: limit.raise.amount_usd, until: DateTime.unsafeFromDate(limit.raise.until) },
        max_open_sessions: null,
        open_sessions: null,
        period_start: limit.period_start === null ? null : DateTime.unsafeFromDate(limit.period_start),
        period_end: limit.period_end === null ? null : DateTime.unsafeFromDate(limit.period_end)
      },
    trusted
  )

/** A limit as `limits.updated` lists it (D19): the record without its use. */
const savedOf = (record: SpendLimitRecord): SavedLimit => ({
  id: record.id,
  scope: record.scope,
  scope_id: record.scope_id,
  period: record.period,
  amount_usd: record.amount_usd,
  warn_at_percent: record.warn_at_percent,
  raise: record.raise,
  max_open_sessions: record.max_open_sessions
})

/**
 * An account's spend and concurrency limits (D16, D19): read with what each has used now, and
 * replaced whole by an administrator under the list's version (D5), each replacement announced
 * by a `limits.updated` event in its transaction (D17's outbox). What "used" is, is
 * `SpendControls/LimitsRepo.ts`'s, the same rules the settlement batch enforces.
 */
export class SpendLimitsService extends Effect.Service<SpendLimitsService>()("SpendControls/Limits", {
  effect: Effect.gen(function*() {
    const read = yield* SpendLimitsRepo
    const write = yield* LimitsWriteRepo
    const accounts = yield* Accounts
    const events = yield* Events
    const sql = yield* SqlClient.SqlClient

    /** The saved list as clients read it; version 0 and no limits while none was ever saved. */
    const current = (account: Account) =>
      Effect.gen(function*() {
        const now = DateTime.toDate(yield* DateTime.now)
        const [sets, used] = yield* Effect.all([read.findSets([account]), read.findUsed([account], now)])
        const set = sets[0]
        return new SpendLimits({
          version: set?.version ?? 0,
          updated_at: set === undefined ? null : DateTime.unsafeFromDate(set.updated_at),
          limits: [...(used[0]?.limits ?? [])].sort(listingOrder).map(recordOf)
        }, trusted)
      })

    const get = Effect.fn("SpendLimits.get")(function*(account: Account) {
      return yield* current(account)
    })

    /** Repository and user limits whose scope id is a repository or user of another account, or of none. */
    const ownerErrors = (account: Account, limits: ReadonlyArray<SpendLimitInput>) =>
      Effect.gen(function*() {
        const named = (scope: "repository" | "user") =>
          limits.flatMap((limit) => limit.scope === scope && isUuid(limit.scope_id) ? [limit.scope_id] : [])
        const owners = yield* accounts.findOwners({ repositoryIds: named("repository"), userIds: named("user") })
        return limits.flatMap((limit, i) => {
          if (limit.scope !== "repository" && limit.scope !== "user") return []
          // A scope id that is no UUID has its own error already.
          if (!isUuid(limit.scope_id)) return []
          const owner = owners.owner(limit.scope, limit.scope_id.toLowerCase())
          return owner !== undefined && owner.kind === account.kind && owner.id === account.id
            ? []
            : [new FieldError({ pointer: `#/limits/${i}/scope_id`, detail: `is not a ${limit.scope} of this account` })]
        })
      })

    /**
     * Replaces the whole list if the saved version is still `expectedVersion`: the list's own
     * rules, then its repositories and users (all 422, every offending field at once), then the
     * version (409), then the write and its `limits.updated` event, by `userId`. The version's
     * check and bump are one conditional statement whose row stays locked to the commit, so of
     * writers racing from one version one succeeds, and one event is written per version.
     */
    const replace = Effect.fn("SpendLimits.replace")(function*(
      account: Account,
      userId: string,
      limits: ReadonlyArray<SpendLimitInput>,
      expectedVersion: number
    ) {
      const errors = [...ruleErrors(limits, yield* DateTime.now), ...yield* ownerErrors(account, limits)]
      if (errors.length > 0) return yield* ValidationFailed.of(errors)
      return yield* Effect.gen(function*() {
        const key = accountKey(account)
        const saved = yield* (expectedVersion === 0
          ? write.insertSet(key)
          : write.updateSet({ ...key, expected_version: expectedVersion }))
        if (Option.isNone(saved)) {
          const sets = yield* read.findSets([account])
          return yield* new VersionConflict({
            detail: "The limits were changed by another writer; read them again.",
            current_version: sets[0]?.version ?? 0
          })
        }
        const columns = {
          ...key,
          scopes: limits.map((limit) => limit.scope),
          scope_ids: limits.map(storedScopeId),
          periods: limits.map((limit) => limit.period),
          amounts: limits.map((limit) => optional(limit.amount_usd, Money.format)),
          max_open_sessions: limits.map((limit) => limit.max_open_sessions ?? null),
          warn_at_percent: limits.map((limit) => limit.warn_at_percent ?? []),
          raise_amounts: limits.map((limit) => optional(limit.raise, (raise) => Money.format(raise.amount_usd))),
          raise_untils: limits.map((limit) => optional(limit.raise, (raise) => DateTime.formatIso(raise.until)))
        }
        yield* write.deleteOthers(columns)
        yield* write.upsertLimits(columns)
        const answer = yield* current(account)
        yield* events.append([{
          account,
          event: {
            type: "limits.updated",
            data: { user_id: userId, version: saved.value.version, limits: answer.limits.map(savedOf) }
          }
        }])
        return answer
      }).pipe(inTransaction(sql))
    })

    return { get, replace } as const
  }),
  dependencies: [SpendLimitsRepo.Default, LimitsWriteRepo.Default, Accounts.Default, Events.Default]
}) {}
