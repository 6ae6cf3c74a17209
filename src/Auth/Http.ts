import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Redacted } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AppConfig } from "../Config.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { clientAddress, trustedProxiesOf } from "../Http/ClientAddress.js"
import { Administrator, Authentication } from "./Middleware.js"

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Auth, (auth) => ({ bearer: (token: Redacted.Redacted) => auth.authenticate(Redacted.value(token)) }))
)

export const AdministratorLive = Layer.effect(
  Administrator,
  Effect.map(Auth, (auth) => ({
    bearer: (token: Redacted.Redacted) =>
      Effect.filterOrFail(
        auth.authenticate(Redacted.value(token)),
        (current) => current.user.is_admin,
        () => new Forbidden({ detail: "Only an administrator can do this." })
      )
  }))
)

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
