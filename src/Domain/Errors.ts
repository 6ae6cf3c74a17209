import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import type { WithResponseHeaders } from "./Problem.js"

/** The errors every group can produce (D1). Domain-specific ones live beside their domain. */

export class FieldError extends Schema.Class<FieldError>("FieldError")({
  /** A JSON Pointer into the request: `#/policy/force_push`, `#/query/limit`, `#` for the whole body. */
  pointer: Schema.String,
  detail: Schema.String
}) {}

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
}

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

/** A write whose `expected_version` is stale (D5, D6); the client refetches and lets the person decide again. */
export class VersionConflict extends Schema.TaggedError<VersionConflict>()(
  "VersionConflict",
  { detail: Schema.String, current_version: Schema.Int },
  HttpApiSchema.annotations({ status: 409 })
) {}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 413 })
) {}

export class RateLimited extends Schema.TaggedError<RateLimited>()(
  "RateLimited",
  { detail: Schema.String, retry_after_seconds: Schema.Int },
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
