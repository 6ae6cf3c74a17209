import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Administrator } from "../Auth/Middleware.js"
import { EventNotFound, Forbidden, RateLimited, Unavailable } from "../Domain/Errors.js"
import { Limit } from "../Domain/Paging.js"
import { problem } from "../Domain/Problem.js"
import {
  CreateWebhookRequest,
  MAX_ENDPOINTS,
  REDELIVERIES_PER_MINUTE,
  Redelivery,
  RotatedSecret,
  UpdateWebhookRequest,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookLimitReached,
  WebhookNotFound,
  WebhookUrlRefused
} from "../Domain/Webhooks.js"

/** Path parameters stay plain strings; the service decides what is unknown. */
const EndpointPath = Schema.Struct({ id: Schema.String })

const ADMIN = "Administrators only (403 before anything else is looked at)."

/** Webhook endpoints and their deliveries (D17). */
export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("createWebhook", "/developer/account/webhooks")
      .annotate(OpenApi.Summary, "Register a webhook endpoint")
      .annotate(
        OpenApi.Description,
        `${ADMIN} At most ${MAX_ENDPOINTS} per account. The answer holds the endpoint's secret, shown only here.`
      )
      .setPayload(CreateWebhookRequest)
      .addSuccess(WebhookEndpointWithSecret, { status: 201 })
      .addError(problem(Forbidden))
      .addError(problem(WebhookLimitReached))
      .addError(problem(WebhookUrlRefused))
  )
  .add(
    HttpApiEndpoint.get("listWebhooks", "/developer/account/webhooks")
      .annotate(OpenApi.Summary, "Webhook endpoints")
      .annotate(OpenApi.Description, ADMIN)
      .addSuccess(WebhookEndpointList)
      .addError(problem(Forbidden))
  )
  .add(
    HttpApiEndpoint.get("getWebhook", "/developer/account/webhooks/:id")
      .annotate(OpenApi.Summary, "A webhook endpoint")
      .annotate(OpenApi.Description, ADMIN)
      .setPath(EndpointPath)
      .addSuccess(WebhookEndpoint)
      .addError(problem(Forbidden))
      .addError(problem(WebhookNotFound))
  )
  .add(
    HttpApiEndpoint.patch("updateWebhook", "/developer/account/webhooks/:id")
      .annotate(OpenApi.Summary, "Change a webhook endpoint")
      .annotate(OpenApi.Description, `${ADMIN} url, types, description, enabled; enabling clears disabled_reason.`)
      .setPath(EndpointPath)
      .setPayload(UpdateWebhookRequest)
      .addSuccess(WebhookEndpoint)
      .addError(problem(Forbidden))
      .addError(problem(WebhookNotFound))
      .addError(problem(WebhookUrlRefused))
  )
  .add(
    HttpApiEndpoint.del("deleteWebhook", "/developer/account/webhooks/:id")
      .annotate(OpenApi.Summary, "Delete a webhook endpoint")
      .annotate(OpenApi.Description, ADMIN)
      .setPath(EndpointPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(problem(Forbidden))
      .addError(problem(WebhookNotFound))
  )
  .add(
    HttpApiEndpoint.post("rotateWebhookSecret", "/developer/account/webhooks/:id/rotate-secret")
      .annotate(OpenApi.Summary, "Rotate a webhook endpoint's secret")
      .annotate(
        OpenApi.Description,
        `${ADMIN} The new secret, shown only here; the previous one keeps signing beside it for 24 hours.`
      )
      .setPath(EndpointPath)
      .addSuccess(RotatedSecret)
      .addError(problem(Forbidden))
      .addError(problem(WebhookNotFound))
  )
  .add(
    HttpApiEndpoint.get("listWebhookDeliveries", "/developer/account/webhooks/:id/deliveries")
      .annotate(OpenApi.Summary, "A webhook endpoint's delivery attempts")
      .annotate(OpenApi.Description, `${ADMIN} Newest first.`)
      .setPath(EndpointPath)
      .setUrlParams(Schema.Struct({ limit: Limit("attempts") }))
      .addSuccess(WebhookDeliveryList)
      .addError(problem(Forbidden))
      .addError(problem(WebhookNotFound))
  )
  .add(
    HttpApiEndpoint.post("redeliverEvent", "/developer/account/events/:id/redeliver")
      .annotate(OpenApi.Summary, "Deliver an event again")
      .annotate(
        OpenApi.Description,
        `${ADMIN} Queues the event again to every enabled endpoint whose types match (same webhook-id). ` +
          `At most ${REDELIVERIES_PER_MINUTE} calls per account per sliding minute ` +
          "(WEBHOOK_REDELIVERIES_PER_MINUTE); beyond it 429 rate_limited with Retry-After, nothing queued."
      )
      .setPath(EndpointPath)
      .addSuccess(Redelivery, { status: 202 })
      .addError(problem(Forbidden))
      .addError(problem(EventNotFound))
      .addError(problem(RateLimited))
      .addError(problem(Unavailable))
  )
  .middleware(Administrator)
{}
