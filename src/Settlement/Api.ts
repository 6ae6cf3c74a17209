import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { EffectiveLimits, EffectiveQuery } from "../Domain/EffectiveLimits.js"
import { Limit } from "../Domain/Paging.js"
import { problem } from "../Domain/Problem.js"
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

/**
 * What applies (D22): the settlement feature answers it, as a reserve would be judged, with the
 * spend controls' endpoints in the documentation.
 */
export class EffectiveLimitsApi extends HttpApiGroup.make("effectiveLimits")
  .add(
    HttpApiEndpoint.get("getEffectiveLimits", "/developer/account/limits/effective")
      .annotate(OpenApi.Identifier, "spend.getEffectiveLimits")
      .annotate(OpenApi.Summary, "What applies to a session")
      .setUrlParams(EffectiveQuery)
      .addSuccess(EffectiveLimits)
      .annotate(
        OpenApi.Description,
        "Exactly the limits a new session attributed to user_id, repository_id and labels (each optional; " +
          "labels as key:value pairs, comma-separated) would be judged by now, each with the scope it applies as " +
          "(an each_ limit for that member, unless the member's own limit of the same period replaces it), its " +
          "effective amount, use, remaining_usd and period_end; funds_usd, what the wallet could hold now (null " +
          "when not enforced); and max_reservable_usd, the largest reserve it could take (the number a refusal " +
          "would carry; null when nothing bounds it). Any member. 422 at #/query/<name> for an id that is no UUID " +
          "or not of the account, and labels that do not parse."
      )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "spend")
{}
