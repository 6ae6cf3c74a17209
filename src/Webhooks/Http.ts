import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AdministratorLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { decodeRequest } from "../Domain/Strict.js"
import {
  CreateWebhookRequest,
  UpdateWebhookRequest,
  WebhookEndpoint,
  WebhookEndpointWithSecret
} from "../Domain/Webhooks.js"
import { Webhooks } from "../Webhooks.js"

/** The administrator's account: every webhook call is one (D17), refused 403 by `Administrator` before anything is decoded. */
const admin = Effect.map(CurrentUser, ({ account }) => account)

const decodeCreate = decodeRequest(CreateWebhookRequest)
const decodeUpdate = decodeRequest(UpdateWebhookRequest)

export const WebhooksHttpLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    return handlers
      .handleRaw("createWebhook", ({ request }) =>
        Effect.gen(function*() {
          const account = yield* admin
          const input = yield* decodeCreate(yield* Effect.orDie(request.json))
          const created = yield* webhooks.create(account, input)
          return yield* HttpServerResponse.schemaJson(WebhookEndpointWithSecret)(created, { status: 201 }).pipe(
            Effect.orDie
          )
        }))
      .handle("listWebhooks", () => Effect.flatMap(admin, (account) => webhooks.list(account)))
      .handle("getWebhook", ({ path }) => Effect.flatMap(admin, (account) => webhooks.get(account, path.id)))
      .handleRaw("updateWebhook", ({ path, request }) =>
        Effect.gen(function*() {
          const account = yield* admin
          const input = yield* decodeUpdate(yield* Effect.orDie(request.json))
          const updated = yield* webhooks.update(account, path.id, input)
          return yield* HttpServerResponse.schemaJson(WebhookEndpoint)(updated).pipe(Effect.orDie)
        }))
      .handle("deleteWebhook", ({ path }) => Effect.flatMap(admin, (account) => webhooks.remove(account, path.id)))
      .handle(
        "rotateWebhookSecret",
        ({ path }) => Effect.flatMap(admin, (account) => webhooks.rotate(account, path.id))
      )
      .handle(
        "listWebhookDeliveries",
        ({ path, urlParams }) =>
          Effect.flatMap(admin, (account) => webhooks.deliveries(account, path.id, urlParams.limit ?? 100))
      )
      .handle("redeliverEvent", ({ path }) => Effect.flatMap(admin, (account) => webhooks.redeliver(account, path.id)))
  })).pipe(Layer.provide(AdministratorLive), Layer.provide([Auth.Default, Webhooks.Default]))
