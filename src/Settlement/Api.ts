import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
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
