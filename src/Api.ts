import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { DirectoryApi } from "./Accounts/Api.js"
import { AuthApi } from "./Auth/Api.js"
import {
  Internal,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  UnsupportedMediaType,
  ValidationFailed
} from "./Domain/Errors.js"
import { problem } from "./Domain/Problem.js"
import { EventsApi } from "./Events/Api.js"
import { polish } from "./OpenApi.js"
import { OperationsApi } from "./Operations/Api.js"
import { PoliciesApi } from "./Policies/Api.js"
import { SettingsApi } from "./Settings/Api.js"
import { EffectiveLimitsApi, SessionsApi } from "./Settlement/Api.js"
import { SpendApi } from "./SpendControls/Api.js"
import { WalletsApi } from "./Wallets/Api.js"
import { WebhooksApi } from "./Webhooks/Api.js"

/** The contract's version: the package's (a test holds them equal). */
export const API_VERSION = "0.1.0"

/**
 * What the API holds, group by group (each group's name in brackets, which a test holds to the
 * contract's groups, so a new group cannot be left out of the document's description).
 */
export const API_DESCRIPTION = [
  "The Account API: what clients and session runners of the coding-agent platform talk to.",
  "",
  "- Sign-in with signed bearer tokens, the caller's user, account and sign-in session, logout (`auth`).",
  "- The account's directory: its repositories and members by name, for the ids the other answers carry (`directory`).",
  "- The account autonomy policy, per-repository overrides with the effective policy, and the capabilities read (`policies`).",
  "- The account-wide USD wallet: budget, credit, the append-only ledger, its CSV export and the balances at a past time (`wallets`).",
  "- Settlement sessions as the settlement queue leaves them, with their holds and caps (`sessions`).",
  "- The account's settings: the time zone and week start its limits and spend report count in (`settings`).",
  "- Spend controls: limits per session, account, repository, user, label and each member, raise requests, and the spend report (`spend`).",
  "- What applies to a session before it starts: its limits, what they leave and the largest reserve (`effectiveLimits`).",
  "- Events: the account's event log, balance alerts and a live server-sent stream (`events`).",
  "- Webhooks signed as Standard Webhooks 1.0: endpoints, secrets and their rotation, deliveries, redelivery (`webhooks`).",
  "- Health, readiness, Prometheus metrics, this document and its interactive page (`operations`).",
  "",
  "Money moves through the settlement queue (BullMQ), not over HTTP. Every amount is a decimal string;",
  "every error an RFC 9457 problem with a stable `code`."
].join("\n")

/** The whole contract: every group, endpoint, schema and error a client can see. */
export class Api extends HttpApi.make("account-api")
  .add(OperationsApi)
  .add(AuthApi)
  .add(DirectoryApi)
  .add(PoliciesApi)
  .add(WalletsApi)
  .add(SessionsApi)
  .add(SettingsApi)
  .add(SpendApi)
  .add(EffectiveLimitsApi)
  .add(EventsApi)
  .add(WebhooksApi)
  .addError(problem(ValidationFailed))
  .addError(problem(PayloadTooLarge))
  .addError(problem(UnsupportedMediaType))
  .addError(problem(NotFound))
  .addError(problem(MethodNotAllowed))
  .addError(problem(Internal))
  .annotateContext(OpenApi.annotations({
    title: "Account API",
    version: API_VERSION,
    description: API_DESCRIPTION,
    transform: polish
  }))
{}
