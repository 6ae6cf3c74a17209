import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { Account, SignIn, User } from "./Account.js"

/** A wrong email or password, or a disabled user: all told the same (D2, D10). */
export class InvalidCredentials extends Schema.TaggedError<InvalidCredentials>()(
  "InvalidCredentials",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

/** A new sign-in: its bearer token, when it ends, and who it is for (D2). */
export class LoginResponse extends Schema.Class<LoginResponse>("LoginResponse")({
  access_token: Schema.String,
  token_type: Schema.Literal("bearer"),
  expires_at: Schema.DateTimeUtc,
  expires_in: Schema.Int,
  user: User
}) {}

/** Who the token's holder is: the user, their account and the sign-in (D2). */
export class MeResponse extends Schema.Class<MeResponse>("MeResponse")({
  user: User,
  account: Account,
  session: SignIn
}) {}
