import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Layer, Redacted } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AppConfig } from "../Config.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { clientAddress, trustedProxiesOf } from "../Http/ClientAddress.js"
import { Administrator, Authentication } from "./Middleware.js"
import { RequestBudget } from "./RequestBudget.js"

/** Sign-out is never refused for the budget: a user past it can still end a token they fear is stolen. */
const UNBUDGETED = new Set(["/auth/logout"])

/** The token checked, then one request taken from its user's budget (D15), but for sign-out. */
const authenticated = (auth: Auth, budget: RequestBudget, token: Redacted.Redacted) =>
  Effect.tap(auth.authenticate(Redacted.value(token)), (current) =>
    Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) => UNBUDGETED.has(request.url.split("?")[0] ?? "") ? Effect.void : budget.take(current.user.id)
    ))

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(
    Effect.all([Auth, RequestBudget]),
    ([auth, budget]) => ({ bearer: (token: Redacted.Redacted) => authenticated(auth, budget, token) })
  )
).pipe(Layer.provide(RequestBudget.Default))

export const AdministratorLive = Layer.effect(
  Administrator,
  Effect.map(Effect.all([Auth, RequestBudget]), ([auth, budget]) => ({
    bearer: (token: Redacted.Redacted) =>
      Effect.filterOrFail(
        authenticated(auth, budget, token),
        (current) => current.user.is_admin,
        () => new Forbidden({ detail: "Only an administrator can do this." })
      )
  }))
).pipe(Layer.provide(RequestBudget.Default))

export const AuthHttpLive = HttpApiBuilder.group(Api, "auth", (handlers) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const proxies = trustedProxiesOf((yield* AppConfig).trustedProxies)
    return handlers
      .handle("login", ({ payload, request }) =>
        auth.login(payload.email, payload.password, clientAddress(request, proxies)))
      .handle("me", () =>
        Effect.map(CurrentUser, auth.me))
      .handle("logout", () => Effect.flatMap(CurrentUser, auth.logout))
  })).pipe(Layer.provide(AuthenticationLive), Layer.provide(Auth.Default))
