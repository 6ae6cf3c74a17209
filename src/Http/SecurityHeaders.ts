import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { CONSOLE_CSP, CONSOLE_PATH } from "../Console/Http.js"

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

/** What every answer under the console's path carries (D20), as the page itself does. */
const CONSOLE_HEADERS = {
  "content-security-policy": CONSOLE_CSP,
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin"
} as const

const underConsole = (url: string) => {
  const path = url.split("?")[0] ?? ""
  return path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`)
}

/**
 * The console's CSP on every answer under `/console`, not only the page and its files: a 404 of a
 * missing file, the redirect of `/console/`, a 405 (D15, D20). An error page a browser renders
 * at the console's origin is held to the same policy as the console.
 */
export const consoleHeaders = HttpMiddleware.make((app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    underConsole(request.url)
      ? Effect.zipRight(
        HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(HttpServerResponse.setHeaders(response, CONSOLE_HEADERS))
        ),
        app
      )
      : app)
)
