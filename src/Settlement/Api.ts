import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { Forbidden, VersionConflict } from "../Domain/Errors.js"
import { Limit } from "../Domain/Paging.js"
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
import { SessionNotFound, WalletSessionDetail, WalletSessionPage } from "../Domain/Wallet.js"

export const SessionsQuery = Schema.Struct({
  state: Schema.optionalWith(
    Schema.Literal("open", "closed", "all").annotations({
      description: "Which sessions: open (holding or able to spend), closed, or all; open when omitted.",
      message: () => ({ message: "must be open, closed or all", override: true })
    }),
    { exact: true }
  ),
  before: Schema.optionalWith(
    Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)).annotations({
      description: "Returns the sessions opened before this one; pass the previous page's next_before.",
      message: () => ({ message: "must be a session id (1 to 255 characters)", override: true })
    }),
    { exact: true }
  ),
  limit: Limit("sessions")
})

/** Path parameters stay plain strings; the service decides what is unknown. */
const SessionPath = Schema.Struct({ session_id: Schema.String })

/**
 * The sessions view (D12), on the wallet's paths. Its own group, so the settlement feature owns
 * its endpoints; documented under the wallet's tag and operation ids, as it always was.
 */
export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.get("listSessions", "/developer/account/wallet/sessions")
      .annotate(OpenApi.Identifier, "wallets.listSessions")
      .annotate(OpenApi.Summary, "Sessions")
      .setUrlParams(SessionsQuery)
      .addSuccess(WalletSessionPage)
      .addError(problem(SessionNotFound))
      .annotate(
        OpenApi.Description,
        "The account's settlement sessions, newest first: what each holds, spent and was charged beyond its holds, " +
          "and when its hold lapses. Pass next_before as before for older ones."
      )
  )
  .add(
    HttpApiEndpoint.get("getSession", "/developer/account/wallet/sessions/:session_id")
      .annotate(OpenApi.Identifier, "wallets.getSession")
      .annotate(OpenApi.Summary, "A session")
      .setPath(SessionPath)
      .addSuccess(WalletSessionDetail)
      .addError(problem(SessionNotFound))
      .annotate(OpenApi.Description, "The session and its ledger entries, oldest first (at most 1,000).")
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "wallets")
{}

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
 * spend report from the running totals. The settlement feature keeps both: it enforces the
 * limits and writes the totals in the transaction that books the money.
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
