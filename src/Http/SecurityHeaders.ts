import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"

/**
 * `X-Content-Type-Options: nosniff` on every answer, errors included (issue 22.10): a browser
 * takes a body for what its Content-Type says (a CSV export or a problem document is never run
 * as a script or rendered as a page).
 */
export const noSniff = HttpMiddleware.make((app) =>
  Effect.zipRight(
    HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, "x-content-type-options", "nosniff"))
    ),
    app
  )
)
