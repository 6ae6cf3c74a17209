import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import { type Account, accountKey, isUuid } from "../Domain/Account.js"
import {
  FieldError,
  LimitNotFound,
  RaiseRequestDecided,
  RaiseRequestNotFound,
  TooManyPendingRequests,
  ValidationFailed
} from "../Domain/Errors.js"
import * as Money from "../Domain/Money.js"
import {
  type ApproveRaiseRequest,
  type CreateRaiseRequest,
  type DecidedRaiseRequest,
  type DeclineRaiseRequest,
  MAX_LISTED_REQUESTS,
  MAX_PENDING_REQUESTS,
  type RaiseRequest,
  type RaiseRequestFilter,
  type RaiseRequestState
} from "../Domain/RaiseRequests.js"
import { raiseAmountProblem, raiseUntilProblem } from "../Domain/Spend.js"
import { Events } from "../Events.js"
import { SpendLimitsService } from "../SpendControls.js"
import { inTransaction } from "../Sql/Errors.js"
import { type RaiseRequestRow, RaiseRequestsRepo } from "./RaiseRequestsRepo.js"

/** Who is asking: the caller's user and whether they administer the account. */
export interface Caller {
  readonly id: string
  readonly is_admin: boolean
}

const utc = DateTime.unsafeFromDate

/** A row as clients read it: the asked fields, and for a decided one who decided, when, and what. */
export const recordOf = (row: RaiseRequestRow): RaiseRequest => {
  const asked = {
    id: row.id,
    limit_id: row.limit_id,
    amount_usd: row.amount_usd,
    until: utc(row.until),
    reason: row.reason,
    requested_by: row.requested_by,
    created_at: utc(row.created_at)
  }
  if (row.state === "pending" || row.decided_by === null || row.decided_at === null) {
    return { ...asked, state: "pending" }
  }
  const decided = { decided_by: row.decided_by, decided_at: utc(row.decided_at) }
  if (row.state === "approved" && row.decided_amount_usd !== null && row.decided_until !== null) {
    return {
      ...asked,
      state: "approved",
      ...decided,
      approved_amount_usd: row.decided_amount_usd,
      approved_until: utc(row.decided_until)
    }
  }
  return { ...asked, state: "declined", ...decided, decline_reason: row.decline_reason }
}

const STATES: Record<RaiseRequestFilter, ReadonlyArray<RaiseRequestState>> = {
  pending: ["pending"],
  decided: ["approved", "declined"],
  all: ["pending", "approved", "declined"]
}

/**
 * Limit raise requests (D22, docs/decisions/D22-limits-where-people-live.md#raise-requests): any
 * member asks for a temporary raise of a spend limit; an administrator lists them, approves one
 * (the limit's D19 raise set as a PUT would set it, by `SpendLimitsService.applyRaise`) or declines
 * it. Every change writes its event in its own transaction (D17's outbox):
 * `limit.raise_requested`, `limit.raise_decided`.
 */
export class RaiseRequests extends Effect.Service<RaiseRequests>()("SpendControls/RaiseRequests", {
  effect: Effect.gen(function*() {
    const repo = yield* RaiseRequestsRepo
    const limits = yield* SpendLimitsService
    const events = yield* Events
    const sql = yield* SqlClient.SqlClient

    /**
     * A new pending request. The limit must be a spend limit of the account (422 at `#/limit_id`),
     * the amount above its amount_usd (`#/amount_usd`), the end as a raise's (`#/until`), every
     * offending field at once; then at most 20 pending (409 `too_many_pending_requests`).
     */
    const create = Effect.fn("RaiseRequests.create")(function*(
      account: Account,
      caller: Caller,
      input: CreateRaiseRequest
    ) {
      const now = yield* DateTime.now
      const limitId = input.limit_id.toLowerCase()
      const limit = (yield* limits.get(account)).limits.find((limit) => limit.id === limitId)
      const errors: Array<FieldError> = []
      const at = (pointer: string, detail: string) => errors.push(new FieldError({ pointer, detail }))
      if (limit === undefined) at("#/limit_id", "is not a limit of this account")
      else if (limit.amount_usd === null) {
        at("#/limit_id", "is a concurrent limit: raises are for spend limits")
      } else {
        const amountProblem = raiseAmountProblem(input.amount_usd, limit.amount_usd)
        if (amountProblem !== undefined) at("#/amount_usd", amountProblem)
      }
      const problem = raiseUntilProblem(input.until, now)
      if (problem !== undefined) at("#/until", problem)
      if (errors.length > 0) return yield* ValidationFailed.of(errors)
      return yield* Effect.gen(function*() {
        const key = accountKey(account)
        yield* repo.lockAccount(key)
        if ((yield* repo.countPending(key)) >= MAX_PENDING_REQUESTS) {
          return yield* new TooManyPendingRequests({
            detail: `An account has at most ${MAX_PENDING_REQUESTS} pending raise requests; wait for one to be ` +
              "decided.",
            limit: MAX_PENDING_REQUESTS
          })
        }
        const row = yield* repo.insert({
          ...key,
          limit_id: limitId,
          amount_usd: Money.format(input.amount_usd),
          until: DateTime.formatIso(input.until),
          reason: input.reason,
          requested_by: caller.id
        })
        // Removed by a PUT since it was read: as if it never was.
        if (Option.isNone(row)) return yield* ValidationFailed.at("#/limit_id", "is not a limit of this account")
        const request = recordOf(row.value)
        if (request.state !== "pending") return yield* Effect.dieMessage("a new raise request is pending")
        yield* events.append([{ account, event: { type: "limit.raise_requested", data: { request } } }])
        return request
      }).pipe(inTransaction(sql))
    })

    /** The account's requests (an administrator's) or the caller's own (a member's), newest first. */
    const list = Effect.fn("RaiseRequests.list")(function*(
      account: Account,
      caller: Caller,
      filter: RaiseRequestFilter
    ) {
      const rows = yield* repo.list({
        ...accountKey(account),
        states: STATES[filter],
        requested_by: caller.is_admin ? null : caller.id,
        limit: MAX_LISTED_REQUESTS
      })
      return { requests: rows.map(recordOf) }
    })

    const notFound = () => new RaiseRequestNotFound({ detail: "No raise request of this account has that id." })

    /** The request of the account with that id, pending (else 409 `raise_request_decided`); 404 when none. */
    const pending = (account: Account, id: string) =>
      Effect.gen(function*() {
        if (!isUuid(id)) return yield* notFound()
        const found = yield* repo.find({ ...accountKey(account), id: id.toLowerCase() })
        if (Option.isNone(found)) return yield* notFound()
        const row = found.value
        if (row.state !== "pending") return yield* decidedError(row.state)
        return row
      })

    const decidedError = (state: "approved" | "declined") =>
      new RaiseRequestDecided({ detail: `The raise request was ${state} already.`, state })

    /** Marks the request decided if it is still pending, and writes `limit.raise_decided`; 409 if another decided it first. */
    const decide = (
      account: Account,
      row: RaiseRequestRow,
      decision: {
        readonly state: "approved" | "declined"
        readonly decided_by: string
        readonly decided_amount_usd: string | null
        readonly decided_until: string | null
        readonly decline_reason: string | null
      }
    ) =>
      Effect.gen(function*() {
        const decided = yield* repo.decide({ ...accountKey(account), id: row.id, ...decision })
        if (Option.isNone(decided)) {
          const now = yield* repo.find({ ...accountKey(account), id: row.id })
          const state = Option.match(now, { onNone: () => decision.state, onSome: (r) => r.state })
          return yield* decidedError(state === "pending" ? decision.state : state)
        }
        const request = recordOf(decided.value)
        if (request.state === "pending") return yield* Effect.dieMessage("a decided raise request is not pending")
        const data: { decision: "approved" | "declined"; request: DecidedRaiseRequest } = {
          decision: request.state,
          request
        }
        yield* events.append([{ account, event: { type: "limit.raise_decided", data } }])
        return request
      })

    /**
     * Approves a pending request: `amount_usd` and `until` at most what was asked (what was asked
     * when left out), the end still in the future, the amount above the limit's amount_usd (all 422
     * at the field); the limit's raise set, its version bumped and `limits.updated` written by
     * `applyRaise`, the request marked approved and `limit.raise_decided` written, in one
     * transaction. 404, 409 `raise_request_decided`, 409 `limit_not_found` (removed by a PUT).
     */
    const approve = Effect.fn("RaiseRequests.approve")(function*(
      account: Account,
      caller: Caller,
      id: string,
      input: ApproveRaiseRequest
    ) {
      const row = yield* pending(account, id)
      const limitId = row.limit_id
      if (limitId === null) {
        return yield* new LimitNotFound({
          detail: "The limit this request names was removed from the account's list; decline the request."
        })
      }
      const now = yield* DateTime.now
      const asked = utc(row.until)
      const amount = input.amount_usd ?? row.amount_usd
      const until = input.until ?? asked
      const errors: Array<FieldError> = []
      if (amount.gt(row.amount_usd)) {
        errors.push(
          new FieldError({
            pointer: "#/amount_usd",
            detail: `must be at most the amount asked (${Money.format(row.amount_usd)})`
          })
        )
      }
      const problem = input.until === undefined
        ? DateTime.greaterThan(asked, now)
          ? undefined
          : `the end asked (${DateTime.formatIso(asked)}) has passed: the request can only be declined`
        : DateTime.greaterThan(until, asked)
        ? `must be at most the end asked (${DateTime.formatIso(asked)})`
        : raiseUntilProblem(until, now)
      if (problem !== undefined) errors.push(new FieldError({ pointer: "#/until", detail: problem }))
      if (errors.length > 0) return yield* ValidationFailed.of(errors)
      return yield* Effect.gen(function*() {
        // The limits' set row first (as a PUT takes it), then the request's: a PUT removing the
        // limit sets the request's limit_id under the same order, so the two never wait on each other.
        yield* limits.applyRaise(account, caller.id, limitId, { amount_usd: amount, until })
        const request = yield* decide(account, row, {
          state: "approved",
          decided_by: caller.id,
          decided_amount_usd: Money.format(amount),
          decided_until: DateTime.formatIso(until),
          decline_reason: null
        })
        return request.state === "approved" ? request : yield* Effect.dieMessage("an approval is approved")
      }).pipe(inTransaction(sql))
    })

    /** Declines a pending request, with an optional reason; 404, 409 `raise_request_decided`. */
    const decline = Effect.fn("RaiseRequests.decline")(function*(
      account: Account,
      caller: Caller,
      id: string,
      input: DeclineRaiseRequest
    ) {
      const row = yield* pending(account, id)
      const request = yield* decide(account, row, {
        state: "declined",
        decided_by: caller.id,
        decided_amount_usd: null,
        decided_until: null,
        decline_reason: input.reason ?? null
      }).pipe(inTransaction(sql))
      return request.state === "declined" ? request : yield* Effect.dieMessage("a decline is declined")
    })

    return { create, list, approve, decline } as const
  }),
  dependencies: [RaiseRequestsRepo.Default, SpendLimitsService.Default, Events.Default]
}) {}
