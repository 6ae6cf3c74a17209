import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Layer, Option, Schema } from "effect"
import {
  FieldError,
  Internal,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  Unavailable,
  ValidationFailed
} from "../Domain/Errors.js"
import { hasResponseHeaders, problem, type ProblemSource } from "../Domain/Problem.js"
import { isCancelled, isDatabaseAway, isLockTimeout } from "../Sql/Errors.js"
import { guardBody, MAX_BODY_BYTES } from "./BodyGuard.js"
import { allowedMethods } from "./Routes.js"

type AnyProblem = { readonly _tag: string }

const problemSourceOf = (error: unknown): ProblemSource<AnyProblem, { readonly _tag: string }> | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const source: unknown = error.constructor
  return Schema.isSchema(source) && "fields" in source && "_tag" in source
    ? source as unknown as ProblemSource<AnyProblem, { readonly _tag: string }>
    : undefined
}

const renderProblem = <A extends AnyProblem, I extends AnyProblem>(error: A, source: ProblemSource<A, I>) =>
  Schema.encode(problem(source))(error).pipe(
    Effect.map((body) =>
      HttpServerResponse.unsafeJson(body, {
        status: HttpApiSchema.getStatusError(source),
        contentType: "application/problem+json",
        headers: hasResponseHeaders(error) ? error.responseHeaders : {}
      })
    ),
    Effect.orDie
  )

/**
 * The framework reports every decode failure alike. Our endpoints take a body
 * (POST/PUT) or query parameters (GET), never both, so the method says which
 * one failed; path parameters are plain strings that the services check.
 */
const fromDecodeError = (error: HttpApiDecodeError, method: string) => {
  const prefix = method === "GET" || method === "HEAD" || method === "DELETE" ? ["query"] : []
  return error.issues.length > 0
    ? ValidationFailed.fromIssues(error.issues, prefix)
    : ValidationFailed.of([new FieldError({ pointer: "#", detail: "The request is not valid." })])
}

const isDecodable = (path: string) => {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}

/** Database trouble that a retry can outlive: connection loss, shutdown, lock timeout, a cancel from outside. */
const isTransientSqlError = (error: SqlError) => isDatabaseAway(error) || isLockTimeout(error) || isCancelled(error)

const databaseUnavailable = () =>
  new Unavailable({ detail: "The service is temporarily unavailable; retry with backoff.", retry_after_seconds: 2 })

/** The framework's own failures, and database outages, as our problems. */
const frameworkProblem = (error: unknown, request: HttpServerRequest.HttpServerRequest): Option.Option<AnyProblem> => {
  if (error instanceof SqlError) return isTransientSqlError(error) ? Option.some(databaseUnavailable()) : Option.none()
  if (typeof error !== "object" || error === null || !("_tag" in error)) return Option.none()
  switch (error._tag) {
    case "HttpApiDecodeError":
      return Option.some(fromDecodeError(error as HttpApiDecodeError, request.method))
    case "RouteNotFound": {
      const path = request.url.split("?")[0] ?? ""
      // A path that does not decode names no resource, whatever route its shape resembles.
      if (!isDecodable(path)) return Option.some(new NotFound({ detail: "The path is not valid percent-encoding." }))
      const allow = allowedMethods(path)
      return Option.some(
        allow.length > 0
          ? new MethodNotAllowed({
            detail: `${path} does not take ${request.method}; it takes ${allow.join(", ")}.`,
            allow
          })
          : new NotFound({ detail: `No route for ${request.method} ${path}.` })
      )
    }
    case "RequestError": {
      const message = String((error as { readonly cause?: unknown }).cause ?? "")
      return Option.some(
        message.includes("maxBytes")
          ? new PayloadTooLarge({ detail: `The body is larger than ${MAX_BODY_BYTES} bytes.` })
          : ValidationFailed.at("#", "The body is not valid JSON.")
      )
    }
  }
  return Option.none()
}

/**
 * The body limit for every request, read when a handler reads its body. Set
 * once for the server rather than per request (which would copy the request's
 * context twice); `guardBody` refuses a larger body before anything reads it.
 */
export const MaxBodySizeLive = Layer.succeed(
  HttpIncomingMessage.MaxBodySize,
  Option.some(FileSystem.Size(MAX_BODY_BYTES))
)

/**
 * Renders every failure as a D1 problem document: typed errors by their own
 * schema, the framework's errors mapped to ours, and anything unexpected as a
 * bare 500 (logged here, never described to the client).
 */
export const ProblemsLive = HttpApiBuilder.middleware((app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.matchEffect(guardBody(request), {
      onFailure: refuseBody,
      onSuccess: (guarded) =>
        Effect.catchAllCause(
          guarded === request ? app : Effect.provideService(app, HttpServerRequest.HttpServerRequest, guarded),
          (cause) => {
            if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
            const error = Cause.squash(cause)
            const candidate = Option.getOrElse(frameworkProblem(error, request), () => error)
            const source = problemSourceOf(candidate)
            if (source !== undefined) return renderProblem(candidate as AnyProblem, source)
            return Effect.logError("Unhandled failure", cause).pipe(
              Effect.zipRight(renderProblem(new Internal({ detail: "An internal error occurred." }), Internal))
            )
          }
        )
    }))
)

/** A body too large to read: refused before any handler runs (D1). What is left of it is not read, so the connection closes. */
const refuseBody = (error: PayloadTooLarge) =>
  Effect.map(renderProblem(error, PayloadTooLarge), HttpServerResponse.setHeader("connection", "close"))
