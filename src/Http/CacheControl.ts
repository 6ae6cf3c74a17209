import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"

/** Answers that hold a token or who holds it, whatever the request carries (D15). */
const PRIVATE_PATHS = new Set(["/auth/login", "/auth/me"])

/**
 * Whether no cache, shared or private, may keep the answer (D15): every answer to a request that
 * carries a bearer token, and sign-in's. An authenticated answer is one member's view (a webhook's
 * secret, a wallet, a ledger) and is never shared. The dashboard, signed in by a cookie, marks
 * its own answers so (D9).
 */
const isPrivate = (request: HttpServerRequest.HttpServerRequest) =>
  request.headers["authorization"] !== undefined || PRIVATE_PATHS.has(request.url.split("?")[0] ?? "")

/** `Cache-Control: no-store` on every private answer, errors included. */
export const noStore = HttpMiddleware.make((app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    isPrivate(request)
      // On the answer as written, whichever path produced it: errors are turned into answers after this runs.
      ? Effect.zipRight(
        HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(HttpServerResponse.setHeader(response, "cache-control", "no-store"))
        ),
        app
      )
      : app)
)
