import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { Policies } from "../Policies.js"
import { capabilities } from "./Capabilities.js"

export const PoliciesHttpLive = HttpApiBuilder.group(Api, "policies", (handlers) =>
  Effect.gen(function*() {
    const policies = yield* Policies
    return handlers
      .handle("getCapabilities", () => Effect.succeed(capabilities))
      .handle(
        "getAccountPolicy",
        () => Effect.flatMap(CurrentUser, ({ account }) => policies.getAccountPolicy(account))
      )
      .handle(
        "replaceAccountPolicy",
        ({ payload }) =>
          Effect.flatMap(CurrentUser, ({ account }) =>
            policies.replaceAccountPolicy(account, payload.policy, payload.expected_version ?? 0))
      )
      .handle(
        "getRepositoryPolicy",
        ({ path }) =>
          Effect.flatMap(CurrentUser, ({ account }) =>
            policies.getRepositoryPolicy(account, path.repository_id))
      )
      .handle(
        "replaceRepositoryPolicy",
        ({ path, payload }) =>
          Effect.flatMap(CurrentUser, ({ account }) =>
            policies.replaceRepositoryPolicy(
              account,
              path.repository_id,
              payload.policy,
              payload.expected_version ?? 0
            ))
      )
  })).pipe(Layer.provide(AuthenticationLive), Layer.provide([Policies.Default, Auth.Default]))
