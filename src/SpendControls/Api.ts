import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { Forbidden, VersionConflict } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"
import {
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
  group_by: SpendGroupBy.annotations({
    description: "How to group: repository, user, day (YYYY-MM-DD) or month (YYYY-MM).",
    message: () => ({ message: "must be repository, user, day or month", override: true })
  }),
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
      .annotate(OpenApi.Summary, "Spend limits")
      .addSuccess(SpendLimits)
      .annotate(
        OpenApi.Description,
        "The account's limits with what each has used in its current UTC period (spends booked plus holds open " +
          "now) and the period's bounds; version 0 and no limits until a list is saved."
      )
  )
  .add(
    HttpApiEndpoint.put("replaceLimits", "/developer/account/limits")
      .annotate(OpenApi.Summary, "Replace the spend limits")
      .setPayload(ReplaceSpendLimitsRequest)
      .addSuccess(SpendLimits)
      .addError(problem(Forbidden))
      .addError(problem(VersionConflict))
      .annotate(
        OpenApi.Description,
        `The whole list, at most ${MAX_SPEND_LIMITS} (administrators only: 403 before the body is read). ` +
          "expected_version is the version last read (omitted means 0); a stale one is 409 version_conflict. " +
          "A scope_id where the scope takes none or missing where it does, a period that does not fit the scope, " +
          "two limits of one scope, scope_id and period, or a repository or user not of the account is 422 at " +
          "the field. A limit kept from the last list (same scope, scope_id and period) keeps its id."
      )
  )
  .add(
    HttpApiEndpoint.get("getSpend", "/developer/account/spend")
      .annotate(OpenApi.Summary, "Spend report")
      .setUrlParams(SpendQuery)
      .addSuccess(SpendReport)
      .annotate(
        OpenApi.Description,
        "What the account's sessions spent, grouped, from running totals kept per UTC day (never a scan of the " +
          "ledger). The window is whole UTC days: from is moved back to its day's start, to forward to the next " +
          "day's start unless it is one. Neither bound: the current UTC month; one alone: a calendar month from or " +
          `up to it. to must be after from and at most ${MAX_SPEND_DAYS} days later (422 otherwise). Groups by ` +
          `spent_usd descending (days and months in order), at most ${MAX_SPEND_GROUPS}; total counts every group.`
      )
  )
  .middleware(Authentication)
{}
