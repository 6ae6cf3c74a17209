import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import { Effect, Layer } from "effect"
import { createRequire } from "node:module"
import path from "node:path"
import { Api } from "../Api.js"

const DOCS_PATH = "/docs"
const OPENAPI_PATH = "/openapi.json"

/** Swagger UI's own files, served from disk as they are: the page's script and style. */
const ASSETS = ["swagger-ui-bundle.js", "swagger-ui.css"] as const

/** Every path served here, all by GET: the documents of D9. */
export const DOCUMENT_PATHS: ReadonlyArray<string> = [
  OPENAPI_PATH,
  DOCS_PATH,
  ...ASSETS.map((asset) => `${DOCS_PATH}/${asset}`)
]
const assetsDirectory = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"))

/** They change only with the package's version, which the file's validators (ETag, Last-Modified) follow. */
const ASSET_CACHE = "public, max-age=3600"

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`)

/**
 * Relative addresses (`docs/…`, `openapi.json`) resolve against `/docs`, so the page works
 * behind a proxy that serves the API under a path of its own.
 */
const page = (title: string) =>
  `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>${escapeHtml(title)} Documentation</title>
  <link rel="stylesheet" href="docs/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/swagger-ui-bundle.js"></script>
  <script>
    window.onload = () => {
      window.ui = SwaggerUIBundle({ url: "openapi.json", dom_id: "#swagger-ui" })
    }
  </script>
</body>
</html>`

/**
 * Interactive documentation at `/docs` (D9): Swagger UI over `/openapi.json`. Its 1.5 MB script
 * is streamed from the package's file on each request, never held in memory: the platform's
 * `HttpApiSwagger` embeds it, twice over (its module's source and the page built from it), 7.6 MB
 * of every API process's heap for a page an operator opens now and then.
 */
const DocsLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const html = HttpServerResponse.html(page(OpenApi.fromApi(Api).info.title))
    yield* router.get(DOCS_PATH, Effect.succeed(html))
    for (const asset of ASSETS) {
      yield* router.get(
        `${DOCS_PATH}/${asset}`,
        HttpServerResponse.file(path.join(assetsDirectory, asset), {
          headers: { "cache-control": ASSET_CACHE }
        }).pipe(Effect.orDie)
      )
    }
  })
)

/** `/openapi.json` and the interactive docs, both from the contract (D9). */
export const DocumentsLive = Layer.mergeAll(HttpApiBuilder.middlewareOpenApi({ path: OPENAPI_PATH }), DocsLive)
