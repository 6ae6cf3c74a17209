import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { Forbidden, VersionConflict } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"
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
    SpendBound("Inclusive: a date (its UTC midnight) or a date-time, counted from its UTC day's start."),
    { exact: true }
  ),
  to: Schema.optionalWith(
    SpendBound("Exclusive: a date (its UTC midnight) or a date-time, counted to the end of its UTC day."),
    { exact: true }
  )
})

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
        "The account's limits with their use now: a spend limit's used_usd in its current UTC period (spends " +
          "booked plus holds open now), the period's bounds and effective_amount_usd (a raise's amount until its " +
          "until, then amount_usd again, with no write); a concurrent limit's open_sessions. Every key is present " +
          "in every limit, null where it does not apply. Version 0 and no limits until a list is saved."
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
          `(account, repository, user or label) has max_open_sessions (1 to ${MAX_OPEN_SESSIONS}) and none of ` +
          "those. 422 at the field, saving nothing: a scope_id where the scope takes none, missing where it " +
          "does, or not of its form (a UUID; a label's key=value); a period that does not fit the scope; a field " +
          "where the limit's kind takes none or missing where it needs one; a raise not above amount_usd or " +
          `whose until is not in the future or more than ${MAX_RAISE_DAYS} days ahead; two limits of one scope, ` +
          "scope_id and period (ids compared whatever their case, labels exactly); a repository or user not of " +
          "the account. A limit kept from the last list (same scope, scope_id and period) keeps its id and takes " +
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
          "model, label:<key>, day or month, comma-separated), from running totals kept per UTC day (never a scan " +
          "of the ledger). Each group carries keys, its value in each dimension in the order asked (null for none), " +
          "and with one dimension key as well. The window is whole UTC days: from is moved back to its day's " +
          "start, to forward to the next day's start unless it is one. Neither bound: the current UTC month; one " +
          `alone: a calendar month from or up to it. to must be after from and at most ${MAX_SPEND_DAYS} days ` +
          `later (422 otherwise). At most ${MAX_SPEND_GROUPS} groups, the smallest spends left out; total counts ` +
          "every group. Listed by spent_usd descending, ties by keys (null last); with day or month, by time " +
          "first. A session counts once, on the day and under the model of its first spend."
      )
  )
  .middleware(Authentication)
{}
