import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { ReplaceSettingsRequest } from "../Domain/Settings.js"
import { decodeRequest } from "../Domain/Strict.js"
import { Settings } from "../Settings.js"

const decodeSettings = decodeRequest(ReplaceSettingsRequest)

/** The settings' handlers (D22). */
export const SettingsHttpLive = HttpApiBuilder.group(Api, "settings", (handlers) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    return handlers
      .handle("getSettings", () => Effect.flatMap(CurrentUser, ({ account }) => settings.get(account)))
      // Raw: the body is read only once the caller is known to be an administrator (as the limits' PUT).
      .handleRaw("replaceSettings", ({ request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* CurrentUser
          if (!user.is_admin) return yield* new Forbidden({ detail: "Only an administrator can change the settings." })
          const body = yield* decodeSettings(yield* Effect.orDie(request.json))
          return yield* settings.replace(account, user.id, body)
        }))
  })).pipe(
    Layer.provide(AuthenticationLive),
    Layer.provide([Auth.Default, Settings.Default])
  )
