import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"

/** What a browser on a listed origin may send and read (D15). */
const ALLOWED_METHODS = "GET, HEAD, PUT, POST, DELETE, OPTIONS"
// `last-event-id`: a browser reading the event stream with fetch resumes it (D17).
const ALLOWED_HEADERS = "authorization, content-type, x-request-id, last-event-id"
const EXPOSED_HEADERS = "Retry-After, Idempotent-Replayed, X-Request-Id"
const MAX_AGE_SECONDS = "600"

/**
 * CORS for the origins in `CORS_ORIGINS` (D15), and only for them: a listed
 * origin's preflight is answered 204 here, its answers (errors included) name
 * it; any other origin gets no CORS header at all, so its browser refuses to
 * read. Effect's own `cors` middleware answers a single configured origin to
 * every caller, which this must not. With no origin listed, nothing changes.
 */
export const cors = (origins: ReadonlyArray<string>) => {
  const allowed = new Set(origins)
  return HttpMiddleware.make((app) =>
    allowed.size === 0 ? app : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const origin = request.headers["origin"]
      if (origin === undefined || !allowed.has(origin)) return app
      const named = { "access-control-allow-origin": origin, vary: "Origin" }
      if (request.method === "OPTIONS" && request.headers["access-control-request-method"] !== undefined) {
        return Effect.succeed(HttpServerResponse.empty({
          status: 204,
          headers: {
            ...named,
            "access-control-allow-methods": ALLOWED_METHODS,
            "access-control-allow-headers": ALLOWED_HEADERS,
            "access-control-max-age": MAX_AGE_SECONDS
          }
        }))
      }
      // On the answer as written, whichever path produced it: errors are turned into answers after this runs.
      const headers = { ...named, "access-control-expose-headers": EXPOSED_HEADERS }
      return Effect.zipRight(
        HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(HttpServerResponse.setHeaders(response, headers))
        ),
        app
      )
    })
  )
}
