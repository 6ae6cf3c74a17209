import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
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
import { SessionsApi, SpendApi } from "./Settlement/Api.js"
import { WalletsApi } from "./Wallets/Api.js"
import { WebhooksApi } from "./Webhooks/Api.js"

/** The contract's version: the package's (a test holds them equal). */
export const API_VERSION = "0.1.0"

/** The whole contract: every group, endpoint, schema and error a client can see. */
export class Api extends HttpApi.make("account-api")
  .add(OperationsApi)
  .add(AuthApi)
  .add(PoliciesApi)
  .add(WalletsApi)
  .add(SessionsApi)
  .add(SpendApi)
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
    description: "Sign-in, the account wallet and ledger, and the account autonomy policy.",
    transform: polish
  }))
{}
