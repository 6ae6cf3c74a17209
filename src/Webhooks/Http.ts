import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AdministratorLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { DEFAULT_PAGE_SIZE } from "../Domain/Paging.js"
import { Webhooks } from "../Webhooks.js"

/** The administrator's account: every webhook call is one (D17), refused 403 by `Administrator` before anything is decoded. */
const admin = Effect.map(CurrentUser, ({ account }) => account)

export const WebhooksHttpLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    return handlers
      // Bodies are decoded by the contract: `Administrator` has refused a member before that (D17).
      .handle("createWebhook", ({ payload }) => Effect.flatMap(admin, (account) => webhooks.create(account, payload)))
      .handle("listWebhooks", () => Effect.flatMap(admin, (account) => webhooks.list(account)))
      .handle("getWebhook", ({ path }) => Effect.flatMap(admin, (account) => webhooks.get(account, path.id)))
      .handle(
        "updateWebhook",
        ({ path, payload }) => Effect.flatMap(admin, (account) => webhooks.update(account, path.id, payload))
      )
      .handle("deleteWebhook", ({ path }) => Effect.flatMap(admin, (account) => webhooks.remove(account, path.id)))
      .handle(
        "rotateWebhookSecret",
        ({ path }) => Effect.flatMap(admin, (account) => webhooks.rotate(account, path.id))
      )
      .handle(
        "listWebhookDeliveries",
        ({ path, urlParams }) =>
          Effect.flatMap(
            admin,
            (account) => webhooks.deliveries(account, path.id, urlParams.limit ?? DEFAULT_PAGE_SIZE)
          )
      )
      .handle("redeliverEvent", ({ path }) => Effect.flatMap(admin, (account) => webhooks.redeliver(account, path.id)))
  })).pipe(Layer.provide(AdministratorLive), Layer.provide([Auth.Default, Webhooks.Default]))
