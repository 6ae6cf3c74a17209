import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { DEFAULT_PAGE_SIZE } from "../Domain/Paging.js"
import { EffectiveLimitsReader } from "./Effective.js"
import { SettlementSessions } from "./Sessions.js"

/** The sessions view's handlers (D12). */
export const SessionsHttpLive = HttpApiBuilder.group(Api, "sessions", (handlers) =>
  Effect.gen(function*() {
    const sessions = yield* SettlementSessions
    return handlers
      .handle("listSessions", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          sessions.list(account, {
            state: urlParams.state ?? "open",
            before: Option.fromNullable(urlParams.before),
            limit: urlParams.limit ?? DEFAULT_PAGE_SIZE
          })))
      .handle(
        "getSession",
        ({ path }) => Effect.flatMap(CurrentUser, ({ account }) => sessions.get(account, path.session_id))
      )
  })).pipe(Layer.provide(AuthenticationLive), Layer.provide([Auth.Default, SettlementSessions.Default]))

/** What applies (D22). */
export const EffectiveLimitsHttpLive = HttpApiBuilder.group(
  Api,
  "effectiveLimits",
  (handlers) =>
    Effect.gen(function*() {
      const reader = yield* EffectiveLimitsReader
      return handlers.handle(
        "getEffectiveLimits",
        ({ urlParams }) => Effect.flatMap(CurrentUser, ({ account }) => reader.read(account, urlParams))
      )
    })
).pipe(Layer.provide(AuthenticationLive), Layer.provide([Auth.Default, EffectiveLimitsReader.Default]))
