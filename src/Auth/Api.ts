import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { EMAIL_PATTERN } from "../Domain/Account.js"
import { RateLimited, Unavailable } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"
import { InvalidCredentials, LoginResponse, MeResponse } from "../Domain/SignIn.js"
import { RequestBody } from "../Domain/Strict.js"
import { Authentication } from "./Middleware.js"

/** An email as people type it; matching is case-insensitive, so no normalisation is imposed here. */
export const Email = Schema.String.pipe(
  Schema.trimmed({ message: () => "must not have surrounding spaces" }),
  Schema.maxLength(254, { message: () => "must be at most 254 characters" }),
  Schema.pattern(EMAIL_PATTERN, { message: () => "must be an email address" })
)

export const LoginRequest = RequestBody("LoginRequest", {
  email: Email,
  password: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(1024, { message: () => "must be at most 1024 characters" })
  )
})

export class AuthApi extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("login", "/auth/login")
      .annotate(OpenApi.Summary, "Sign in")
      .annotate(
        OpenApi.Description,
        "Exchanges an email and password for a bearer token (24 h by default). A wrong email or password is 401 invalid_credentials; repeated failures are 429 rate_limited with Retry-After."
      )
      .setPayload(LoginRequest)
      .addSuccess(LoginResponse)
      .addError(problem(InvalidCredentials))
      .addError(problem(RateLimited))
      .addError(problem(Unavailable))
  )
  .add(
    HttpApiEndpoint.get("me", "/auth/me")
      .annotate(OpenApi.Summary, "The signed-in user")
      .annotate(
        OpenApi.Description,
        "The user, their account (organisation or user) and the sign-in session the token belongs to. 401 means: sign in again."
      )
      .addSuccess(MeResponse)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.post("logout", "/auth/logout")
      .annotate(OpenApi.Summary, "Sign out")
      .annotate(
        OpenApi.Description,
        "Revokes the token's sign-in session: that token is then 401 everywhere. Other sessions stay valid."
      )
      .addSuccess(HttpApiSchema.NoContent)
      .middleware(Authentication)
  )
{}
