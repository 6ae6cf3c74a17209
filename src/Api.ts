import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { AuthApi } from "./Auth/Api.js"
import { Internal, MethodNotAllowed, NotFound, PayloadTooLarge, UnsupportedMediaType, ValidationFailed } from "./Domain/Errors.js"
import { problem } from "./Domain/Problem.js"
import { OperationsApi } from "./Operations/Api.js"
import { PoliciesApi } from "./Policies/Api.js"
import { WalletsApi } from "./Wallets/Api.js"

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null

/**
 * The framework documents its own decode error (400) on every endpoint; ours
 * answer those with 422 `validation_failed` instead, and send every error as
 * `application/problem+json`. This makes the document say so.
 */
const describeProblems = (spec: Json): Json => {
  for (const path of Object.values(isObject(spec.paths) ? spec.paths : {})) {
    for (const operation of Object.values(isObject(path) ? path : {})) {
      if (!isObject(operation) || !isObject(operation.responses)) continue
      const responses = operation.responses
      delete responses["400"]
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) < 400 || !isObject(response) || !isObject(response.content)) continue
        const json = response.content["application/json"]
        if (json !== undefined) response.content = { "application/problem+json": json }
      }
    }
  }
  if (isObject(spec.components) && isObject(spec.components.schemas)) delete spec.components.schemas.HttpApiDecodeError
  return spec
}

/** The whole contract: every group, endpoint, schema and error a client can see. */
export class Api extends HttpApi.make("account-api")
  .add(OperationsApi)
  .add(AuthApi)
  .add(PoliciesApi)
  .add(WalletsApi)
  .addError(problem(ValidationFailed))
  .addError(problem(PayloadTooLarge))
  .addError(problem(UnsupportedMediaType))
  .addError(problem(NotFound))
  .addError(problem(MethodNotAllowed))
  .addError(problem(Internal))
  .annotateContext(OpenApi.annotations({
    title: "Account API",
    version: "1.0.0",
    description: "Sign-in, the account wallet and ledger, and the account autonomy policy.",
    transform: describeProblems
  }))
{}
