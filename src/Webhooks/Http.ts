import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { decodeRequest } from "../Domain/Strict.js"
import {
  CreateWebhookRequest,
  UpdateWebhookRequest,
  WebhookEndpoint,
  WebhookEndpointWithSecret
} from "../Domain/Webhooks.js"
import { Webhooks } from "../Webhooks.js"

/** Every webhook call is an administrator's (D17), checked right after authentication, before any body. */
const admin = Effect.flatMap(CurrentUser, ({ account, user }) =>
  user.is_admin
    ? Effect.succeed(account)
    : Effect.fail(new Forbidden({ detail: "Only an administrator can manage webhooks." })))

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
  })).pipe(Layer.provide(AuthenticationLive), Layer.provide([Auth.Default, Webhooks.Default]))
