import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { eventTypes, isEventType } from "./Events.js"
import { RequestBody } from "./Strict.js"

/** Webhook endpoints and their delivery (D17), as Standard Webhooks 1.0 has them. */

/** Most endpoints an account may have (D17). */
export const MAX_ENDPOINTS = 10

/** After a rotation the previous secret keeps signing beside the new one this long (D17). */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000

/** A delivery answered with any 2xx within this is delivered (D17). */
export const DELIVERY_TIMEOUT_MS = 10_000

/** Waits before each retry after the first attempt (D17): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; then failed. */
export const RETRY_DELAYS_MS: ReadonlyArray<number> = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000
]

/** A `Retry-After` on 429 or 503 is honoured up to this (D17). */
export const RETRY_AFTER_CAP_MS = 3_600_000

/** An endpoint with only failures for this long is disabled (D17). */
export const FAILING_DISABLES_AFTER_MS = 5 * 24 * 3_600_000

/**
 * Deliveries in flight at once, across every worker, by default (D17): per account, so one
 * account's endpoints that never answer hold at most this many of the workers' slots, and per
 * endpoint, so one such endpoint leaves its account's other endpoints room.
 */
export const IN_FLIGHT_PER_ACCOUNT = 10
export const IN_FLIGHT_PER_ENDPOINT = 4

/** Redeliveries an account may ask for per sliding minute, by default (D17); more are 429. */
export const REDELIVERIES_PER_MINUTE = 60

/**
 * The wait before retry `n` (1-based) after a failed attempt, `scale` times the schedule (tests
 * compress days into seconds), with ±10 % jitter so retries of many endpoints spread out; a
 * `Retry-After` (capped at an hour) replaces it when longer. `undefined` once the retries are spent.
 */
export const retryDelay = (
  retry: number,
  options: { readonly scale: number; readonly retryAfterMs?: number | undefined; readonly random?: () => number }
): number | undefined => {
  const base = RETRY_DELAYS_MS[retry - 1]
  if (base === undefined) return undefined
  const jitter = 0.9 + 0.2 * (options.random ?? Math.random)()
  const scheduled = Math.round(base * options.scale * jitter)
  const asked = options.retryAfterMs === undefined
    ? 0
    : Math.min(options.retryAfterMs, RETRY_AFTER_CAP_MS) * options.scale
  return Math.max(scheduled, Math.round(asked))
}

/** `Retry-After` as seconds or an HTTP date, in milliseconds from `now`; undefined when absent or unreadable. */
export const parseRetryAfter = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/**
 * Why an attempt got no 2xx, as the deliveries list shows it (D17): a closed set, each with a fixed
 * text, so the list says what class of failure it was and never which socket error (which would
 * map a network's open and closed ports). Operators find the raw error in the worker's log.
 */
export const DELIVERY_FAILURES = {
  url_refused: "the URL is not https",
  address_refused: "the address is not public",
  dns_failed: "the name did not resolve",
  connection_failed: "no connection could be made, or it was lost before an answer",
  tls_failed: "the TLS handshake failed",
  timeout: `no answer within ${DELIVERY_TIMEOUT_MS / 1000} s`,
  redirect: "answered a redirect (redirects are not followed)",
  http_status: "answered a status other than 2xx",
  gone: "answered 410 Gone: the endpoint is disabled"
} as const
export type DeliveryFailure = keyof typeof DELIVERY_FAILURES

/** An attempt's `error`: the class, then its text. */
export const deliveryError = (failure: DeliveryFailure) => `${failure}: ${DELIVERY_FAILURES[failure]}`

const EventTypeName = Schema.String.pipe(Schema.filter(isEventType)).annotations({
  jsonSchema: { type: "string", enum: eventTypes },
  message: () => ({ message: `must be one of ${eventTypes.join(", ")}`, override: true })
})

const Types = Schema.Array(EventTypeName).pipe(
  Schema.minItems(1, { message: () => "must list at least one type (omit it for every type)" })
).annotations({ description: "The event types delivered; omitted or null, every type." })

const Url = Schema.String.pipe(
  Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
  Schema.pattern(/^https?:\/\/[!-~]+$/, { message: () => "must be an https URL" })
).annotations({
  description:
    "https only; http, localhost and addresses that are not public (in any spelling) only where WEBHOOK_ALLOW_INSECURE=true (else 422 webhook_url_refused)."
})

const Description = Schema.String.pipe(Schema.maxLength(500, { message: () => "must be at most 500 characters" }))

export const CreateWebhookRequest = RequestBody("CreateWebhookRequest", {
  url: Url,
  types: Schema.optionalWith(Schema.NullOr(Types), { exact: true }),
  description: Schema.optionalWith(Schema.NullOr(Description), { exact: true })
})

export const UpdateWebhookRequest = RequestBody("UpdateWebhookRequest", {
  url: Schema.optionalWith(Url, { exact: true }),
  types: Schema.optionalWith(Schema.NullOr(Types), { exact: true }),
  description: Schema.optionalWith(Schema.NullOr(Description), { exact: true }),
  enabled: Schema.optionalWith(Schema.Boolean, { exact: true })
})

/** An endpoint as answered: never its secret (but for the answer that made it or rotated it). */
export const WebhookEndpoint = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  description: Schema.NullOr(Schema.String),
  types: Schema.NullOr(Schema.Array(Schema.String)),
  enabled: Schema.Boolean,
  disabled_reason: Schema.NullOr(Schema.String),
  created_at: Schema.DateTimeUtc,
  updated_at: Schema.DateTimeUtc
}).annotations({ identifier: "WebhookEndpoint" })
export type WebhookEndpoint = typeof WebhookEndpoint.Type

export const WebhookEndpointWithSecret = Schema.Struct({
  ...WebhookEndpoint.fields,
  secret: Schema.String.annotations({ description: "whsec_ and base64 of 32 random bytes; shown only here." })
}).annotations({ identifier: "WebhookEndpointWithSecret" })

export const WebhookEndpointList = Schema.Struct({ endpoints: Schema.Array(WebhookEndpoint) }).annotations({
  identifier: "WebhookEndpointList"
})

export const RotatedSecret = Schema.Struct({
  secret: Schema.String,
  previous_secret_expires_at: Schema.DateTimeUtc
}).annotations({ identifier: "RotatedSecret" })

/** One attempt to deliver an event to an endpoint. */
export const WebhookDelivery = Schema.Struct({
  id: Schema.String,
  event_id: Schema.String,
  event_type: Schema.String,
  attempt: Schema.Int,
  outcome: Schema.String.annotations({
    description: "delivered, retrying (see next_attempt_at), failed (retries spent) or gone (410)."
  }),
  status_code: Schema.NullOr(Schema.Int),
  duration_ms: Schema.Int,
  error: Schema.NullOr(Schema.String).annotations({
    description: `Null when delivered; else the class of failure and its text, one of: ${
      Object.keys(DELIVERY_FAILURES).join(", ")
    }.`
  }),
  next_attempt_at: Schema.NullOr(Schema.DateTimeUtc),
  attempted_at: Schema.DateTimeUtc
}).annotations({ identifier: "WebhookDelivery" })

export const WebhookDeliveryList = Schema.Struct({ deliveries: Schema.Array(WebhookDelivery) }).annotations({
  identifier: "WebhookDeliveryList"
})

export const Redelivery = Schema.Struct({
  event_id: Schema.String,
  endpoints: Schema.Int.annotations({ description: "How many endpoints the event was queued to again." })
}).annotations({ identifier: "Redelivery" })

/** An endpoint id that names none of the account's endpoints. */
export class WebhookNotFound extends Schema.TaggedError<WebhookNotFound>()(
  "WebhookNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** An eleventh endpoint (D17: at most ten). */
export class WebhookLimitReached extends Schema.TaggedError<WebhookLimitReached>()(
  "WebhookLimitReached",
  { detail: Schema.String, limit: Schema.Int },
  HttpApiSchema.annotations({ status: 409 })
) {}

/**
 * A URL of the right shape the service will not send to: `http`, or an address that is not public
 * (in any spelling), without `WEBHOOK_ALLOW_INSECURE`; one that does not parse. Apart from
 * `validation_failed`: it depends on the deployment's setting, not on the document.
 */
export class WebhookUrlRefused extends Schema.TaggedError<WebhookUrlRefused>()(
  "WebhookUrlRefused",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 422 })
) {}
