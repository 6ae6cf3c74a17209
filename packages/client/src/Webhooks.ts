import { Either } from "effect"
import { Webhook, WebhookVerificationError } from "standardwebhooks"
import { type AccountEvent, checkEvent } from "./Events.js"

/**
 * Receiving webhooks (D17): a delivery is checked with the official Standard Webhooks verifier
 * (`standardwebhooks`: the `v1` HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}` with
 * the secret's bytes, and a timestamp within 5 minutes of now), then its body
 * (`{ type, timestamp, data }`) against the catalog's schema of its type.
 */

/** A delivered event: `id` is the `webhook-id` header (the event's id; deduplicate by it), `timestamp` the body's. */
export type WebhookEvent = AccountEvent extends infer E
  ? E extends AccountEvent ? Omit<E, "created_at"> & { readonly timestamp: string } : never
  : never

/** The request's headers as Node's `IncomingMessage` has them, or a Fetch `Headers`. */
export type WebhookHeaders =
  | Headers
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export type WebhookFailure =
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing. */
  | "missing_headers"
  /** The timestamp is not a number, or more than 5 minutes from now (a replay, or a clock off). */
  | "invalid_timestamp"
  /** No `v1` signature of the header matches any of the secrets. */
  | "invalid_signature"
  /** Signed, but the body is not an event of the catalog (a type this version does not know, or data off its schema). */
  | "invalid_payload"

/** The delivery is not to be trusted (or, `invalid_payload`, not understood): answer it 400, and act on nothing. */
export class WebhookVerificationFailed extends Error {
  override readonly name = "WebhookVerificationFailed"
  constructor(readonly reason: WebhookFailure, detail: string) {
    super(`${reason}: ${detail}`)
  }
}

const header = (headers: WebhookHeaders, name: string): string | undefined => {
  if (headers instanceof Headers) return headers.get(name) ?? undefined
  const value = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1]
  return typeof value === "string" ? value : value?.[0]
}

const failureOf = (error: WebhookVerificationError): WebhookFailure =>
  error.message === "Missing required headers"
    ? "missing_headers"
    : error.message === "No matching signature found"
    ? "invalid_signature"
    : "invalid_timestamp"

/**
 * Verifies a delivery and answers its event, or throws `WebhookVerificationFailed`. `secrets`:
 * the endpoint's secret (`whsec_…`), or several while one is being rotated (the service signs
 * with both for 24 h; either is enough). `body`: the request's body exactly as received, before
 * any JSON parsing.
 */
export const verifyWebhook = (
  secrets: string | ReadonlyArray<string>,
  body: string | Uint8Array,
  headers: WebhookHeaders
): WebhookEvent => {
  const keys = typeof secrets === "string" ? [secrets] : secrets
  if (keys.length === 0) throw new Error("verifyWebhook needs at least one secret")
  const text = typeof body === "string" ? body : new TextDecoder().decode(body)
  const id = header(headers, "webhook-id")
  const timestamp = header(headers, "webhook-timestamp")
  const signature = header(headers, "webhook-signature")
  if (id === undefined || timestamp === undefined || signature === undefined) {
    throw new WebhookVerificationFailed(
      "missing_headers",
      "webhook-id, webhook-timestamp and webhook-signature are required"
    )
  }
  const signed = { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature }
  let failure: WebhookVerificationError | undefined
  let payload: unknown
  let verified = false
  for (const key of keys) {
    try {
      payload = new Webhook(key).verify(text, signed)
      verified = true
      break
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error
      // A stale timestamp fails every secret alike; a signature only this one's.
      failure = error
    }
  }
  if (!verified) {
    const error = failure ?? new WebhookVerificationError("No matching signature found")
    throw new WebhookVerificationFailed(failureOf(error), error.message)
  }
  if (typeof payload !== "object" || payload === null || !("type" in payload) || !("timestamp" in payload)) {
    throw new WebhookVerificationFailed("invalid_payload", "the body is not { type, timestamp, data }")
  }
  // Checked as the event it is: the header's id, the body's type, timestamp and data.
  const event = checkEvent({ ...payload, id, created_at: payload.timestamp })
  if (Either.isLeft(event)) throw new WebhookVerificationFailed("invalid_payload", event.left)
  const { created_at, ...rest } = event.right
  return { ...rest, timestamp: created_at }
}
