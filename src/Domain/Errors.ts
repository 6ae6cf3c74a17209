import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { type ParseResult, Schema } from "effect"
import type { WithResponseHeaders } from "./Problem.js"

/** The errors every group can produce (D1). Domain-specific ones live beside their domain. */

export class FieldError extends Schema.Class<FieldError>("FieldError")({
  /** A JSON Pointer into the request: `#/policy/force_push`, `#/query/limit`, `#` for the whole body. */
  pointer: Schema.String,
  detail: Schema.String
}) {}

/** A JSON Pointer (RFC 6901) behind `#`: `#/policy/force_push`, `#/query/limit`, `#` for the whole body. */
export const pointerOf = (path: ReadonlyArray<string>): string =>
  "#" + path.map((part) => "/" + part.replace(/~/g, "~0").replace(/\//g, "~1")).join("")

/**
 * A decode message says what was expected, never what was sent: Effect's
 * messages end with `, actual <the value>`, which may be a password.
 */
const withoutReceivedValue = (message: string): string => message.replace(/,?\s*actual [\s\S]*$/, "")

export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()(
  "ValidationFailed",
  { detail: Schema.String, errors: Schema.Array(FieldError) },
  HttpApiSchema.annotations({ status: 422 })
) {
  static of(errors: ReadonlyArray<FieldError>): ValidationFailed {
    return new ValidationFailed({ detail: "The request is not valid; see errors.", errors })
  }
  static at(pointer: string, detail: string): ValidationFailed {
    return ValidationFailed.of([new FieldError({ pointer, detail })])
  }
  /**
   * One field error per decode issue, worded the same whether the framework
   * decoded the request or a handler did. `prefix` places the issue paths in
   * the request (`["query"]` for query parameters).
   */
  static fromIssues(
    issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>,
    prefix: ReadonlyArray<string> = []
  ): ValidationFailed {
    return ValidationFailed.of(issues.map((issue) =>
      new FieldError({
        pointer: pointerOf([...prefix, ...issue.path.map(String)]),
        detail: issue._tag === "Missing"
          ? "is required"
          : issue._tag === "Unexpected"
          ? "is not a known field"
          : withoutReceivedValue(issue.message)
      })
    ))
  }
}

/** A write based on a stale read (D5, D6): the client refetches and lets the person decide again. */
export class VersionConflict extends Schema.TaggedError<VersionConflict>()(
  "VersionConflict",
  { detail: Schema.String, current_version: Schema.Int },
  HttpApiSchema.annotations({ status: 409 })
) {}

export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()(
  "Unauthenticated",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) implements WithResponseHeaders {
  get responseHeaders() {
    return { "www-authenticate": "Bearer" }
  }
}

export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 413 })
) {}

/** A known path asked with a method it does not have (D15); `allow` lists those it has. */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()(
  "MethodNotAllowed",
  { detail: Schema.String, allow: Schema.Array(Schema.String) },
  HttpApiSchema.annotations({ status: 405 })
) implements WithResponseHeaders {
  get responseHeaders() {
    return { allow: this.allow.join(", ") }
  }
}

/** A body on a JSON endpoint that is not JSON by its Content-Type (D15). */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 415 })
) {}

/**
 * Too many at once or too often. Refused by a named bound (the live streams open at once, D17),
 * it names that bound (`limit_name`) and its value (`limit`), as `webhook_limit_reached` gives its `limit`.
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()(
  "RateLimited",
  {
    detail: Schema.String,
    retry_after_seconds: Schema.Int,
    limit_name: Schema.optionalWith(Schema.String, { exact: true }),
    limit: Schema.optionalWith(Schema.Int, { exact: true })
  },
  HttpApiSchema.annotations({ status: 429 })
) implements WithResponseHeaders {
  get responseHeaders() {
    return { "retry-after": String(this.retry_after_seconds) }
  }
}

export class Unavailable extends Schema.TaggedError<Unavailable>()(
  "Unavailable",
  { detail: Schema.String, retry_after_seconds: Schema.Int },
  HttpApiSchema.annotations({ status: 503 })
) implements WithResponseHeaders {
  get responseHeaders() {
    return { "retry-after": String(this.retry_after_seconds) }
  }
}

export class Internal extends Schema.TaggedError<Internal>()(
  "Internal",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 500 })
) {}

/** An `after` that names no event of the account's log (D17): never written, another account's, or pruned. */
export class EventNotFound extends Schema.TaggedError<EventNotFound>()(
  "EventNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** A limit raise request (D22) that is not the account's: never made, or another account's. */
export class RaiseRequestNotFound extends Schema.TaggedError<RaiseRequestNotFound>()(
  "RaiseRequestNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** A limit raise request (D22) already approved or declined: it is decided once. */
export class RaiseRequestDecided extends Schema.TaggedError<RaiseRequestDecided>()(
  "RaiseRequestDecided",
  { detail: Schema.String, state: Schema.Literal("approved", "declined") },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** An account with as many pending limit raise requests as it may keep (D22: `limit`, 20). */
export class TooManyPendingRequests extends Schema.TaggedError<TooManyPendingRequests>()(
  "TooManyPendingRequests",
  { detail: Schema.String, limit: Schema.Int },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** A limit raise request (D22) whose limit a later PUT of the limits removed: nothing is left to raise. */
export class LimitNotFound extends Schema.TaggedError<LimitNotFound>()(
  "LimitNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}
