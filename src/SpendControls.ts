import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import { Accounts } from "./Accounts.js"
import { type Account, accountKey, isUuid } from "./Domain/Account.js"
import { FieldError, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import { type SpendLimitInput, SpendLimits } from "./Domain/Spend.js"
import { Events } from "./Events.js"
import { Settings } from "./Settings.js"
import { listingOrder, recordOf, ruleErrors, savedOf, storedScopeId } from "./SpendControls/LimitRules.js"
import { SpendLimitsRepo } from "./SpendControls/LimitsRepo.js"
import { LimitsWriteRepo } from "./SpendControls/LimitsWriteRepo.js"
import { inTransaction } from "./Sql/Errors.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

/** An optional field of the PUT as a column's value: null when absent. */
const optional = <A, B>(value: A | undefined, f: (value: A) => B): B | null => value === undefined ? null : f(value)

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
    const settings = yield* Settings
    const sql = yield* SqlClient.SqlClient

    /** The saved list as clients read it; version 0 and no limits while none was ever saved. */
    const current = (account: Account) =>
      Effect.gen(function*() {
        const now = DateTime.toDate(yield* DateTime.now)
        const [sets, used, { timezone }] = yield* Effect.all([
          read.findSets([account]),
          read.findUsed([account], now),
          settings.get(account)
        ])
        const set = sets[0]
        return new SpendLimits({
          version: set?.version ?? 0,
          timezone,
          updated_at: set === undefined ? null : DateTime.unsafeFromDate(set.updated_at),
          limits: [...(used[0]?.limits ?? [])].sort(listingOrder).map(recordOf(timezone))
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
          window_minutes: limits.map((limit) => limit.window_minutes ?? null),
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
  dependencies: [
    SpendLimitsRepo.Default,
    LimitsWriteRepo.Default,
    Accounts.Default,
    Events.Default,
    Settings.Default
  ]
}) {}
