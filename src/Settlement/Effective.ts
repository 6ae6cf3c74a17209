import { Effect, Either, Schema } from "effect"
import { type Account, isUuid } from "../Domain/Account.js"
import { EffectiveLimit, EffectiveLimits, type EffectiveQuery, parseLabelQuery } from "../Domain/EffectiveLimits.js"
import { FieldError, ValidationFailed } from "../Domain/Errors.js"
import { Labels } from "../Domain/Labels.js"
import * as Money from "../Domain/Money.js"
import { available } from "../Domain/Movement.js"
import { type Attribution, countsSession, isEachScope, type UsedLimit } from "../Domain/SpendLimit.js"
import { Settings } from "../Settings.js"
import { listingOrder, recordOf } from "../SpendControls/LimitRules.js"
import { balanceOf } from "../Wallets/GrantRows.js"
import { plan } from "./Plan.js"
import { announcedOf, grantRowOf, limitsOf, membersOf, nowOf, walletRowOf } from "./State.js"
import { SettlementTransition } from "./Transition.js"

/** A reserve larger than any wallet holds: refused, it answers the largest one that would apply. */
const PROBE_AMOUNT = Money.format(Money.max)
/** The probe's session: never read, so it is new whatever the account's sessions are called. */
const PROBE_SESSION = "effective-limits-probe"

const decodeLabels = Schema.decodeUnknownEither(Labels)

/**
 * What applies (D22): the limits a new session of an attribution would be judged by now, and
 * the largest reserve it could take. Computed as a reserve is: the settlement transition's own
 * read (the same limits, members, periods and use), then the planner itself deciding a reserve
 * too large to fit, whose refusal carries the largest that would (D19). Nothing is written.
 */
export class EffectiveLimitsReader extends Effect.Service<EffectiveLimitsReader>()("Settlement/EffectiveLimits", {
  effect: Effect.gen(function*() {
    const transition = yield* SettlementTransition
    const settings = yield* Settings

    /** The query as an attribution, each field's problem at its parameter (422 before anything is read). */
    const attributionOf = (query: EffectiveQuery) => {
      const errors: Array<FieldError> = []
      const at = (name: string, detail: string) => errors.push(new FieldError({ pointer: `#/query/${name}`, detail }))
      if (query.user_id !== undefined && !isUuid(query.user_id)) at("user_id", "must be a UUID (a user's id)")
      if (query.repository_id !== undefined && !isUuid(query.repository_id)) {
        at("repository_id", "must be a UUID (a repository's id)")
      }
      let labels: Record<string, string> = {}
      if (query.labels !== undefined) {
        const parsed = parseLabelQuery(query.labels)
        if (typeof parsed === "string") at("labels", parsed)
        else {
          const decoded = decodeLabels(parsed)
          if (Either.isLeft(decoded)) at("labels", "must be at most 10 labels, each key:value as a session's labels")
          else labels = { ...decoded.right }
        }
      }
      return { errors, labels }
    }

    const read = Effect.fn("EffectiveLimits.read")(function*(account: Account, query: EffectiveQuery) {
      const { errors, labels } = attributionOf(query)
      if (errors.length > 0) return yield* ValidationFailed.of(errors)
      const reserve = {
        account_id: account.id,
        session_id: PROBE_SESSION,
        amount_usd: PROBE_AMOUNT,
        idempotency_key: PROBE_SESSION,
        ...(query.user_id === undefined ? {} : { user_id: query.user_id.toLowerCase() }),
        ...(query.repository_id === undefined ? {} : { repository_id: query.repository_id.toLowerCase() }),
        labels
      }
      const state = yield* transition.read({
        accounts: [account.id],
        keys: [],
        sessions: [],
        repositories: reserve.repository_id === undefined ? [] : [reserve.repository_id],
        users: reserve.user_id === undefined ? [] : [reserve.user_id],
        members: membersOf(account.id, reserve),
        expire: []
      })
      // Ids of another account, or of none, are as unknown here as to a reserve (D16).
      const owned = (kind: "repository" | "user", id: string | undefined) =>
        id === undefined || state.owners.some((o) => o.owned === kind && o.id === id && o.account_id === account.id)
      const unknown = [
        ...(owned("user", reserve.user_id) ? [] : [["user_id", "is not a user of this account"] as const]),
        ...(owned("repository", reserve.repository_id)
          ? []
          : [["repository_id", "is not a repository of this account"] as const])
      ]
      if (unknown.length > 0) {
        return yield* ValidationFailed.of(
          unknown.map(([name, detail]) => new FieldError({ pointer: `#/query/${name}`, detail }))
        )
      }
      const { timezone } = yield* settings.get(account)
      const wallet = state.accounts.find((found) => found.id === account.id)?.wallet ?? null
      const now = nowOf(state)
      const limits = limitsOf(state.limits, now)
      // The limits that count a session of this attribution (a session limit caps every one).
      const attribution: Attribution = {
        repository_id: reserve.repository_id ?? null,
        user_id: reserve.user_id ?? null,
        labels
      }
      const judging = limits
        .filter((limit) => limit.scope === "session" || countsSession(limit, attribution))
        .sort(listingOrder)
      const before = wallet === null ? undefined : walletRowOf(account, wallet)
      const balances = before === undefined
        ? { budget: Money.zero, reserved: Money.zero, spent: Money.zero }
        : { budget: before.budget_usd, reserved: before.reserved_usd, spent: before.spent_usd }
      const enforced = before?.enforced ?? false
      const planned = plan({
        balances,
        enforced,
        sessions: new Map(),
        firstOutcomes: new Map(),
        jobs: [{ kind: "reserve", payload: reserve }],
        now,
        reservationTtlMs: 0,
        limits,
        announced: announcedOf(state.limits),
        grants: wallet === null
          ? []
          : state.grants.map((grant) => balanceOf(grantRowOf(grant, wallet.id)))
      })
      const decision = planned.decisions[0]
      const maxReservable = decision?._tag === "Decided" && decision.first.outcome !== "applied"
        ? decision.first.max_reservable_usd
        : null
      const record = recordOf(timezone)
      return new EffectiveLimits({
        timezone,
        limits: judging.map((limit) => effectiveOf(limit, record(limit))),
        funds_usd: enforced ? atLeastZero(available(balances)) : null,
        max_reservable_usd: maxReservable
      })
    })

    return { read } as const
  }),
  dependencies: [SettlementTransition.Default, Settings.Default]
}) {}

const atLeastZero = (amount: Money.Decimal) => amount.gt(0) ? amount : Money.zero

/** A limit as it judges the session: by an `each_` scope for a member, what it leaves. */
const effectiveOf = (limit: UsedLimit, record: ReturnType<ReturnType<typeof recordOf>>): EffectiveLimit =>
  new EffectiveLimit({
    ...record,
    used_usd: limit.kind === "spend" ? limit.used_usd : null,
    open_sessions: limit.kind === "concurrent" ? limit.open_sessions : null,
    applies_as: limit.scope,
    applies_to: isEachScope(limit.scope) ? limit.applies_to : null,
    remaining_usd: limit.kind === "spend"
      ? atLeastZero(limit.effective_amount_usd.minus(limit.used_usd))
      : null
  })
