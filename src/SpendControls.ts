import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import { Accounts } from "./Accounts.js"
import { type Account, accountKey } from "./Domain/Account.js"
import { FieldError, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import { type SpendLimitInput, SpendLimitRecord, SpendLimits } from "./Domain/Spend.js"
import type { UsedLimit } from "./Domain/SpendLimit.js"
import { SpendLimitsRepo } from "./SpendControls/LimitsRepo.js"
import { LimitsWriteRepo } from "./SpendControls/LimitsWriteRepo.js"
import { inTransaction } from "./Sql/Errors.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

/** What a limit is, for duplicates: scope, scope id (ids compared as PostgreSQL does, case aside) and period. */
const identityOf = (limit: SpendLimitInput) => `${limit.scope}/${limit.scope_id?.toLowerCase() ?? ""}/${limit.period}`

const SCOPE_ORDER = ["account", "repository", "user", "session"] as const
const PERIOD_ORDER = ["day", "week", "month", "session"] as const

/**
 * The order limits are listed in, whatever order they were sent or saved in: by scope (account,
 * repository, user, session), then period (day, week, month), then scope id.
 */
const listingOrder = (a: UsedLimit, b: UsedLimit) =>
  SCOPE_ORDER.indexOf(a.scope) - SCOPE_ORDER.indexOf(b.scope) ||
  PERIOD_ORDER.indexOf(a.period) - PERIOD_ORDER.indexOf(b.period) ||
  (a.scope_id ?? "").localeCompare(b.scope_id ?? "")

/**
 * The rules a list breaks on its own (D16), each at the field that breaks it: a scope id where
 * the scope takes one and only there, `session` as the period of session limits and of them
 * only, no two limits of the same scope, scope id and period.
 */
const ruleErrors = (limits: ReadonlyArray<SpendLimitInput>): Array<FieldError> => {
  const errors: Array<FieldError> = []
  const seen = new Map<string, number>()
  limits.forEach((limit, i) => {
    const at = (field: string, detail: string) =>
      errors.push(new FieldError({ pointer: `#/limits/${i}${field}`, detail }))
    const named = limit.scope === "repository" || limit.scope === "user"
    const scopeId = limit.scope_id ?? null
    if (named && scopeId === null) at("/scope_id", `is required for a ${limit.scope} limit`)
    if (!named && scopeId !== null) at("/scope_id", `must be null for an ${limit.scope} limit`)
    if (limit.scope === "session" && limit.period !== "session") at("/period", "must be session for a session limit")
    if (limit.scope !== "session" && limit.period === "session") {
      at("/period", `must be day, week or month for a${limit.scope === "account" ? "n" : ""} ${limit.scope} limit`)
    }
    const identity = identityOf(limit)
    const first = seen.get(identity)
    if (first === undefined) seen.set(identity, i)
    else at("", `repeats the scope, scope_id and period of #/limits/${first}`)
  })
  return errors
}

/**
 * An account's spend limits (D16): read with what each has used in its current period, and
 * replaced whole by an administrator under the list's version (D5). What "used" is, is
 * `SpendControls/LimitsRepo.ts`'s, the same read the settlement batch enforces.
 */
export class SpendLimitsService extends Effect.Service<SpendLimitsService>()("SpendControls/Limits", {
  effect: Effect.gen(function*() {
    const read = yield* SpendLimitsRepo
    const write = yield* LimitsWriteRepo
    const accounts = yield* Accounts
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
          limits: [...(used[0]?.limits ?? [])].sort(listingOrder).map((limit) =>
            new SpendLimitRecord({
              ...limit,
              period_start: limit.period_start === null ? null : DateTime.unsafeFromDate(limit.period_start),
              period_end: limit.period_end === null ? null : DateTime.unsafeFromDate(limit.period_end)
            }, trusted)
          )
        }, trusted)
      })

    const get = Effect.fn("SpendLimits.get")(function*(account: Account) {
      return yield* current(account)
    })

    /**
     * Replaces the whole list if the saved version is still `expectedVersion`: the list's own
     * rules, then its repositories and users (all 422, every offending field at once), then the
     * version (409), then the write. The version's check and bump are one conditional statement
     * whose row stays locked to the commit, so of writers racing from one version one succeeds.
     */
    const replace = Effect.fn("SpendLimits.replace")(function*(
      account: Account,
      limits: ReadonlyArray<SpendLimitInput>,
      expectedVersion: number
    ) {
      const errors = ruleErrors(limits)
      const named = (scope: "repository" | "user") =>
        limits.flatMap((limit) =>
          limit.scope === scope && limit.scope_id !== undefined && limit.scope_id !== null ? [limit.scope_id] : []
        )
      const owners = yield* accounts.findOwners({
        repositoryIds: named("repository"),
        userIds: named("user")
      })
      limits.forEach((limit, i) => {
        if (limit.scope !== "repository" && limit.scope !== "user") return
        if (limit.scope_id === undefined || limit.scope_id === null) return
        const owner = owners.owner(limit.scope, limit.scope_id.toLowerCase())
        if (owner === undefined || owner.kind !== account.kind || owner.id !== account.id) {
          errors.push(
            new FieldError({ pointer: `#/limits/${i}/scope_id`, detail: `is not a ${limit.scope} of this account` })
          )
        }
      })
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
          scope_ids: limits.map((limit) => limit.scope_id?.toLowerCase() ?? null),
          periods: limits.map((limit) => limit.period),
          amounts: limits.map((limit) => Money.format(limit.amount_usd))
        }
        yield* write.deleteOthers(columns)
        yield* write.upsertLimits(columns)
        return yield* current(account)
      }).pipe(inTransaction(sql))
    })

    return { get, replace } as const
  }),
  dependencies: [SpendLimitsRepo.Default, LimitsWriteRepo.Default, Accounts.Default]
}) {}
