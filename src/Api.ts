import { HttpApi, OpenApi } from "@effect/platform"
import { AuthApi } from "./Auth/Api.js"
import { HealthApi } from "./Health/Api.js"
import { WalletsApi } from "./Wallets/Api.js"
import { Internal, NotFound, PayloadTooLarge, ValidationFailed } from "./Domain/Errors.js"
import { problem } from "./Domain/Problem.js"

/** The whole contract: every group, endpoint, schema and error a client can see. */
export class Api extends HttpApi.make("account-api")
  .add(HealthApi)
  .add(AuthApi)
  .add(WalletsApi)
  .addError(problem(ValidationFailed))
  .addError(problem(PayloadTooLarge))
  .addError(problem(NotFound))
  .addError(problem(Internal))
  .annotateContext(OpenApi.annotations({
    title: "Account API",
    version: "1.0.0",
    description: "Sign-in, the account wallet and ledger, and the account autonomy policy."
  }))
{}
