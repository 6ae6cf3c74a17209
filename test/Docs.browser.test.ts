import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { TestApp } from "./support/TestApp.js"

/** `/docs` as a person opens it (D9): Swagger UI loads its script and style and draws the contract. */
describe.skipIf(!hasChromium)("interactive documentation in a browser", () => {
  layer(TestApp(), { excludeTestServices: true })("Chromium", (it) => {
    it.scoped(
      "/docs draws the contract's operations from /openapi.json, with no error on the page",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const browser = yield* launchChromium
          const context = yield* Effect.promise(() => browser.newContext())
          // Only our server is reachable: everything the page needs must come from it.
          const elsewhere: Array<string> = []
          yield* Effect.promise(() =>
            context.route((url) => !url.href.startsWith(base), (route) => {
              elsewhere.push(route.request().url())
              return route.abort("blockedbyclient")
            })
          )
          const page = yield* Effect.promise(() => context.newPage())
          const pageErrors: Array<string> = []
          page.on("pageerror", (error) => pageErrors.push(error.message))
          const loaded: Array<string> = []
          page.on("response", (response) => loaded.push(`${response.status()} ${new URL(response.url()).pathname}`))

          const answer = yield* Effect.promise(() => page.goto(`${base}/docs`))
          expect(answer?.status()).toBe(200)
          yield* Effect.promise(() => page.locator(".swagger-ui .info .title").waitFor({ timeout: 15_000 }))
          expect(yield* Effect.promise(() => page.locator(".swagger-ui .info .title").innerText())).toContain(
            "Account API"
          )
          // An operation of each kind the contract has, drawn from the document the page fetched.
          yield* Effect.promise(() => page.locator(`[data-path="/auth/login"]`).first().waitFor({ timeout: 15_000 }))
          expect(yield* Effect.promise(() => page.locator(`[data-path="/developer/account/wallet"]`).count()))
            .toBeGreaterThan(0)
          expect(loaded).toEqual(
            expect.arrayContaining([
              "200 /docs",
              "200 /docs/swagger-ui.css",
              "200 /docs/swagger-ui-bundle.js",
              "200 /openapi.json"
            ])
          )
          expect(pageErrors).toEqual([])
          expect(elsewhere).toEqual([])
        }),
      { timeout: 60_000 }
    )
  })
})
