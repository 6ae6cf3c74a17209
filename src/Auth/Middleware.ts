import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import { Schema } from "effect"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden, RateLimited, Unauthenticated, Unavailable } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"

/**
 * The middleware tags every feature's contract names; `Auth/Http.ts` implements them. Apart from
 * `Auth/Api.ts`, so that no feature's contract imports another's.
 */

/**
 * Bearer-token security for every route but sign-in; provides `CurrentUser` (D2, D3). Takes one
 * request from the user's budget (D15): 429 `rate_limited` past it.
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  provides: CurrentUser,
  failure: Schema.Union(problem(Unauthenticated), problem(Unavailable), problem(RateLimited)),
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/**
 * `Authentication` for a group whose every call is an administrator's (D17's webhooks): 403
 * `forbidden` for any other member, before the path, the query or the body is decoded.
 */
export class Administrator extends HttpApiMiddleware.Tag<Administrator>()("Administrator", {
  provides: CurrentUser,
  failure: Schema.Union(problem(Unauthenticated), problem(Unavailable), problem(Forbidden), problem(RateLimited)),
  security: { bearer: HttpApiSecurity.bearer }
}) {}
