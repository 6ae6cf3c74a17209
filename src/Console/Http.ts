import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { NotFound, Unavailable } from "../Domain/Errors.js"

export const CONSOLE_PATH = "/console"
const ASSETS_PATH = `${CONSOLE_PATH}/assets`

/** Every path served here, all by GET: for D15's 405 on another method. */
export const CONSOLE_PATHS: ReadonlyArray<string> = [CONSOLE_PATH, `${ASSETS_PATH}/:file`]

/**
 * What the build (scripts/build-console.mjs) wrote: `dist/console/` at the repository's root.
 * This module runs from `src/Console/` under tests and from `dist/src/` once built (the API is
 * one bundle there), both two folders below the root.
 */
const BUILT = fileURLToPath(new URL("../../dist/console/", import.meta.url))

/** D20: no script or style but the console's own files, no other origin, no framing. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

/** The page names the current files, so it is checked each time; the files' names change with their content. */
const PAGE_CACHE = "no-cache"
const ASSET_CACHE = "public, max-age=31536000, immutable"

/** A built file's name: `main-5GQ3MZKD.js`, `favicon-1a2b3c4d.svg`; nothing that could leave the folder. Its type follows its extension. */
const ASSET_NAME = /^[\w-]+\.(js|css|svg)$/

const securityHeaders = {
  "content-security-policy": CONSOLE_CSP,
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin"
}

const notBuilt = new Unavailable({
  detail: "The console is not built: `npm start` (or `node scripts/build.mjs dist`) builds it.",
  retry_after_seconds: 60
})

/** `/console/` (the router takes it for `/console`) is sent to `/console`, where the page's addresses resolve. */
const page = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) =>
    (request.url.split("?")[0] ?? "").endsWith("/")
      ? Effect.succeed(HttpServerResponse.redirect("../console", { status: 301 }))
      : existsSync(`${BUILT}index.html`)
      ? HttpServerResponse.file(`${BUILT}index.html`, {
        contentType: "text/html; charset=utf-8",
        headers: { ...securityHeaders, "cache-control": PAGE_CACHE }
      }).pipe(Effect.orDie)
      : Effect.fail(notBuilt)
)

const asset = Effect.gen(function*() {
  const { file = "" } = yield* HttpRouter.params
  if (!ASSET_NAME.test(file) || !existsSync(`${BUILT}assets/${file}`)) {
    return yield* new NotFound({ detail: `The console has no file ${file}.` })
  }
  return yield* HttpServerResponse.file(`${BUILT}assets/${file}`, {
    headers: { ...securityHeaders, "cache-control": ASSET_CACHE }
  }).pipe(Effect.orDie)
})

/**
 * The console (D20, docs/console.md) at `/console`: one page and its content-hashed script and
 * style, served from the API's own origin with the CSP and cache headers D20 names. The console
 * routes by the address's hash (`/console#/spend`), so `/console` is its only page.
 */
export const ConsoleLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    yield* router.get(CONSOLE_PATH, page)
    yield* router.get(`${ASSETS_PATH}/:file`, asset)
  })
)
