import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import {
  Forbidden,
  LimitNotFound,
  RaiseRequestDecided,
  RaiseRequestNotFound,
  TooManyPendingRequests,
  VersionConflict
} from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"
import {
  ApprovedRaiseRequest,
  ApproveRaiseRequest,
  CreateRaiseRequest,
  DeclinedRaiseRequest,
  DeclineRaiseRequest,
  MAX_LISTED_REQUESTS,
  MAX_PENDING_REQUESTS,
  MAX_REASON,
  PendingRaiseRequest,
  RaiseRequestFilter,
  RaiseRequestList
} from "../Domain/RaiseRequests.js"
import {
  MAX_OPEN_SESSIONS,
  MAX_RAISE_DAYS,
  MAX_SPEND_DAYS,
  MAX_SPEND_GROUPS,
  MAX_SPEND_LIMITS,
  ReplaceSpendLimitsRequest,
  SpendBound,
  SpendGroupBy,
  SpendLimits,
  SpendReport
} from "../Domain/Spend.js"

export const SpendQuery = Schema.Struct({
  group_by: SpendGroupBy,
  from: Schema.optionalWith(
    SpendBound("Inclusive: a date (its midnight in the account's zone) or a date-time, counted from its day's start."),
    { exact: true }
  ),
  to: Schema.optionalWith(
    SpendBound("Exclusive: a date (its midnight in the account's zone) or a date-time, counted to the end of its day."),
    { exact: true }
  )
})

export const RaiseRequestsQuery = Schema.Struct({
  state: Schema.optionalWith(
    RaiseRequestFilter.annotations({
      description: "pending (the default), decided (approved or declined) or all."
    }),
    { exact: true }
  )
})

export const RaiseRequestPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The raise request's id." })
})

/** An operation whose body may be left out: approve and decline take none, or a partial one. */
const bodyOptional = (operation: Record<string, unknown>): Record<string, unknown> => ({
  ...operation,
  requestBody: {
    ...(typeof operation.requestBody === "object" && operation.requestBody !== null ? operation.requestBody : {}),
    required: false
  }
})

const DECIDED_SHOWS = "A pending request shows id, state, limit_id, amount_usd, until, reason, requested_by and " +
  "created_at; a decided one adds decided_by and decided_at, and approved_amount_usd and approved_until (the raise " +
  "set) when approved, or decline_reason (null when none was given) when declined. limit_id is null once a PUT of " +
  "the limits removed the limit."

/**
 * Spend controls (D16): the account's limits per repository, user, session and period, and the
 * spend report from the running totals. The settlement batch enforces the limits and writes the
 * totals, in the transaction that books the money; these endpoints read and replace the limits
 * and read the totals.
 */
export class SpendApi extends HttpApiGroup.make("spend")
  .add(
    HttpApiEndpoint.get("getLimits", "/developer/account/limits")
      .annotate(OpenApi.Summary, "Spend and concurrency limits")
      .addSuccess(SpendLimits)
      .annotate(
        OpenApi.Description,
        "The account's limits with their use now: a spend limit's used_usd in its current period in the account's " +
          "time zone, or its rolling window (spends booked plus holds open now), the period's bounds with the " +
          "zone's offset and effective_amount_usd (a raise's amount until its until, then amount_usd again, with no " +
          "write); a concurrent limit's open_sessions; an each_ limit's use is each member's own (null here; see " +
          "GET /developer/account/limits/effective). Every key is present in every limit, null where it does not " +
          "apply. Version 0 and no limits until a list is saved."
      )
  )
  .add(
    HttpApiEndpoint.put("replaceLimits", "/developer/account/limits")
      .annotate(OpenApi.Summary, "Replace the limits")
      .setPayload(ReplaceSpendLimitsRequest)
      .addSuccess(SpendLimits)
      .addError(problem(Forbidden))
      .addError(problem(VersionConflict))
      .annotate(
        OpenApi.Description,
        `The whole list, at most ${MAX_SPEND_LIMITS} (administrators only: 403 before the body is read). ` +
          "expected_version is the version last read (omitted means 0); a stale one is 409 version_conflict. " +
          "A spend limit has amount_usd and may have warn_at_percent and a raise; a concurrent limit " +
          `(every scope but session) has max_open_sessions (1 to ${MAX_OPEN_SESSIONS}) and none of those; a ` +
          "rolling limit has window_minutes and no warn_at_percent. each_user, each_repository and each_label (its " +
          "scope_id the label key) apply to every member separately, a member's own limit of the same period " +
          "replacing them (D22). 422 at the field, saving nothing: a scope_id where the scope takes none, missing " +
          "where it does, or not of its form (a UUID; a label's key=value; a label key); a period that does not " +
          "fit the scope; a field " +
          "where the limit's kind takes none or missing where it needs one; a raise not above amount_usd or " +
          `whose until is not in the future or more than ${MAX_RAISE_DAYS} days ahead; two limits of one scope, ` +
          "scope_id, period and window (ids compared whatever their case, labels exactly); a repository or user " +
          "not of the account. A limit kept from the last list (same scope, scope_id, period and window) keeps its " +
          "id and takes " +
          "the new values. Each save writes one limits.updated event."
      )
  )
  .add(
    HttpApiEndpoint.get("getSpend", "/developer/account/spend")
      .annotate(OpenApi.Summary, "Spend report")
      .setUrlParams(SpendQuery)
      .addSuccess(SpendReport)
      .annotate(
        OpenApi.Description,
        "What the account's sessions spent, grouped by one to three dimensions (group_by: repository, user, " +
          "model, label:<key>, day or month, comma-separated), from running totals kept per day in the account's " +
          "time zone (D22; never a scan of the ledger). Each group carries keys, its value in each dimension in the order asked (null for none), " +
          "and with one dimension key as well. The window is whole days of the account's zone: from is moved back to its day's " +
          "start, to forward to the next day's start unless it is one. Neither bound: the current month; one " +
          `alone: a calendar month from or up to it. to must be after from and at most ${MAX_SPEND_DAYS} days ` +
          `later (422 otherwise). At most ${MAX_SPEND_GROUPS} groups, the smallest spends left out; total counts ` +
          "every group. Listed by spent_usd descending, ties by keys (null last); with day or month, by time " +
          "first. A session counts once, on the day and under the model of its first spend."
      )
  )
  .add(
    HttpApiEndpoint.post("createRaiseRequest", "/developer/account/limits/raise-requests")
      .annotate(OpenApi.Summary, "Ask for a limit raise")
      .setPayload(CreateRaiseRequest)
      .addSuccess(PendingRaiseRequest, { status: 201 })
      .addError(problem(TooManyPendingRequests))
      .annotate(
        OpenApi.Description,
        "Any member asks for a temporary raise of a spend limit (D22): limit_id a day, week, month or session " +
          "limit of the account (a concurrent limit takes no raise), amount_usd above its amount_usd, until in the " +
          `future and at most ${MAX_RAISE_DAYS} days ahead, reason 1 to ${MAX_REASON} characters; 422 at the field ` +
          `otherwise, every offending field at once, nothing written. At most ${MAX_PENDING_REQUESTS} pending per ` +
          "account: beyond, 409 too_many_pending_requests. Answers 201 with the pending request and writes a " +
          "limit.raise_requested event. " + DECIDED_SHOWS
      )
  )
  .add(
    HttpApiEndpoint.get("listRaiseRequests", "/developer/account/limits/raise-requests")
      .annotate(OpenApi.Summary, "Limit raise requests")
      .setUrlParams(RaiseRequestsQuery)
      .addSuccess(RaiseRequestList)
      .annotate(
        OpenApi.Description,
        "Raise requests newest first, pending ones unless state says decided or all: an administrator sees the " +
          `account's, a member only their own; at most ${MAX_LISTED_REQUESTS}. ` + DECIDED_SHOWS
      )
  )
  .add(
    HttpApiEndpoint.post("approveRaiseRequest", "/developer/account/limits/raise-requests/:id/approve")
      .annotate(OpenApi.Summary, "Approve a limit raise request")
      .setPath(RaiseRequestPath)
      .setPayload(ApproveRaiseRequest)
      .annotate(OpenApi.Transform, bodyOptional)
      .addSuccess(ApprovedRaiseRequest)
      .addError(problem(Forbidden))
      .addError(problem(RaiseRequestNotFound))
      .addError(problem(RaiseRequestDecided))
      .addError(problem(LimitNotFound))
      .annotate(
        OpenApi.Description,
        "Administrators only (403 before the body is read). The body may be left out, or give amount_usd and " +
          "until, each at most what was asked (what was asked when left out); the amount must still be above the " +
          "limit's amount_usd and the end in the future (422 at the field). Sets the limit's raise as a PUT of the " +
          "limits would, in one transaction: the list's version goes up by one, with a limits.updated event and a " +
          "limit.raise_decided event. 404 raise_request_not_found (none of this account's); 409 " +
          "raise_request_decided (approved or declined already, with its state); 409 limit_not_found (a PUT " +
          "removed the limit). Answers the approved request. " + DECIDED_SHOWS
      )
  )
  .add(
    HttpApiEndpoint.post("declineRaiseRequest", "/developer/account/limits/raise-requests/:id/decline")
      .annotate(OpenApi.Summary, "Decline a limit raise request")
      .setPath(RaiseRequestPath)
      .setPayload(DeclineRaiseRequest)
      .annotate(OpenApi.Transform, bodyOptional)
      .addSuccess(DeclinedRaiseRequest)
      .addError(problem(Forbidden))
      .addError(problem(RaiseRequestNotFound))
      .addError(problem(RaiseRequestDecided))
      .annotate(
        OpenApi.Description,
        "Administrators only (403 before the body is read). The body may be left out, or give a reason (1 to " +
          `${MAX_REASON} characters). The limit is left as it is; writes a limit.raise_decided event. 404 ` +
          "raise_request_not_found; 409 raise_request_decided. Answers the declined request. " + DECIDED_SHOWS
      )
  )
  .middleware(Authentication)
{}
