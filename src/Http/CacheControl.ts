import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"

/** Answers that hold a token or who holds it: no cache, shared or private, may keep them (D15). */
const PRIVATE_PATHS = new Set(["/auth/login", "/auth/me"])

/** `Cache-Control: no-store` on every answer of those paths, errors included. */
export const noStore = HttpMiddleware.make((app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    PRIVATE_PATHS.has(request.url.split("?")[0] ?? "")
      // On the answer as written, whichever path produced it: errors are turned into answers after this runs.
      ? Effect.zipRight(
        HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(HttpServerResponse.setHeader(response, "cache-control", "no-store"))
        ),
        app
      )
      : app)
)
