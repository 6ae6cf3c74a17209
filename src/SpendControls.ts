import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import { Accounts } from "./Accounts.js"
import { type Account, accountKey, isUuid } from "./Domain/Account.js"
import { FieldError, LimitNotFound, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import { raiseAmountProblem, raiseUntilProblem, type SpendLimitInput, SpendLimits } from "./Domain/Spend.js"
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

    /** The list as saved, announced by its `limits.updated` (D19), in the saving transaction. */
    const announcedSave = (account: Account, userId: string, version: number) =>
      Effect.gen(function*() {
        const answer = yield* current(account)
        yield* events.append([{
          account,
          event: { type: "limits.updated", data: { user_id: userId, version, limits: answer.limits.map(savedOf) } }
        }])
        return answer
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
        return yield* announcedSave(account, userId, saved.value.version)
      }).pipe(inTransaction(sql))
    })

    /**
     * Sets one spend limit's D19 raise as a PUT that changed only that raise would (D22's approved
     * raise requests): the set's version up by one (its row locked to the commit, as a PUT's), the
     * raise written, and `limits.updated` by `userId`, in one transaction (a savepoint of the
     * caller's). The raise is held to a PUT's rules against the limit as it is under that lock:
     * above its amount_usd (422 at `#/amount_usd`), ending in the future and within 90 days (422 at
     * `#/until`). A limit that is gone, or not a spend limit, is 409 `limit_not_found`.
     */
    const applyRaise = Effect.fn("SpendLimits.applyRaise")(function*(
      account: Account,
      userId: string,
      limitId: string,
      raise: { readonly amount_usd: Money.Decimal; readonly until: DateTime.Utc }
    ) {
      const gone = new LimitNotFound({ detail: "The limit is no longer in the account's list; read the limits again." })
      return yield* Effect.gen(function*() {
        const saved = yield* write.bumpSet(accountKey(account))
        if (Option.isNone(saved)) return yield* gone
        const limit = (yield* current(account)).limits.find((limit) => limit.id === limitId)
        if (limit === undefined || limit.amount_usd === null) return yield* gone
        const now = yield* DateTime.now
        const problems = [
          ["#/amount_usd", raiseAmountProblem(raise.amount_usd, limit.amount_usd)],
          ["#/until", raiseUntilProblem(raise.until, now)]
        ] as const
        const errors = problems.flatMap(([pointer, detail]) =>
          detail === undefined ? [] : [new FieldError({ pointer, detail })]
        )
        if (errors.length > 0) return yield* ValidationFailed.of(errors)
        const written = yield* write.setRaise({
          ...accountKey(account),
          limit_id: limitId,
          raise_amount: Money.format(raise.amount_usd),
          raise_until: DateTime.formatIso(raise.until)
        })
        if (!written) return yield* gone
        return yield* announcedSave(account, userId, saved.value.version)
      }).pipe(inTransaction(sql))
    })

    return { get, replace, applyRaise } as const
  }),
  dependencies: [
    SpendLimitsRepo.Default,
    LimitsWriteRepo.Default,
    Accounts.Default,
    Events.Default,
    Settings.Default
  ]
}) {}
