import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { CONSOLE_CSP } from "../src/Console/Http.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"

/**
 * D15: no cache may keep an authenticated answer, a webhook's secret first of all; D20: every
 * answer under `/console` is held to the console's CSP, errors and redirects included.
 */
layer(TestApp({ WEBHOOK_ALLOW_INSECURE: "true" }), { excludeTestServices: true })(
  "private answers (D15, D20)",
  (it) => {
    describe("Cache-Control", () => {
      it.effect("a webhook's secret, on creation and rotation, is answered no-store", () =>
        Effect.gen(function*() {
          const admin = yield* signedInUser({ admin: true })
          const created = yield* call("POST", "/developer/account/webhooks", {
            token: admin.token,
            body: { url: "https://example.com/hook", types: ["wallet.credit_added"] }
          })
          expect(created.status, JSON.stringify(created.body)).toBe(201)
          expect(JSON.stringify(created.body)).toContain("whsec_")
          expect(created.headers["cache-control"]).toBe("no-store")
          const id = String((created.body as { id: string }).id)
          const rotated = yield* call("POST", `/developer/account/webhooks/${id}/rotate-secret`, { token: admin.token })
          expect(rotated.status, JSON.stringify(rotated.body)).toBe(200)
          expect(JSON.stringify(rotated.body)).toContain("whsec_")
          expect(rotated.headers["cache-control"]).toBe("no-store")
        }))

      it.effect("every answer to a request with a bearer token is no-store, errors included", () =>
        Effect.gen(function*() {
          const user = yield* signedInUser()
          const replies = yield* Effect.all([
            call("GET", "/developer/account/wallet", { token: user.token }),
            call("GET", "/developer/account/events", { token: user.token }),
            call("GET", "/developer/account/spend", { token: user.token }),
            call("GET", "/developer/account/limits", { token: user.token }),
            call("GET", "/developer/account/wallet/as-of?at=nonsense", { token: user.token }),
            call("GET", "/developer/account/webhooks", { token: user.token }),
            call("DELETE", "/developer/account/wallet", { token: user.token }),
            call("GET", "/developer/account/wallet", { token: "not-a-token" }),
            call("GET", "/auth/me", { token: user.token })
          ])
          expect(replies.map((reply) => [reply.status, reply.headers["cache-control"]])).toEqual(
            replies.map((reply) => [reply.status, "no-store"])
          )
        }))

      it.effect("what is public stays cacheable: the console's files, without a token", () =>
        Effect.gen(function*() {
          const page = yield* call("GET", "/console")
          expect(page.headers["cache-control"]).not.toBe("no-store")
        }))
    })

    describe("the console's CSP", () => {
      it.effect("the 404 of a missing file, the redirect of /console/ and a 405 carry it, as the page does", () =>
        Effect.gen(function*() {
          const replies = yield* Effect.all([
            call("GET", "/console"),
            call("GET", "/console/"),
            call("GET", "/console/assets/main-NOTTHERE.js"),
            call("GET", "/console/assets/..%2Findex.html"),
            call("GET", "/console/no/such/page"),
            call("POST", "/console")
          ])
          expect(replies.map((reply) => reply.status)).toEqual([200, 301, 404, 404, 404, 405])
          for (const reply of replies) {
            expect(reply.headers["content-security-policy"], String(reply.status)).toBe(CONSOLE_CSP)
            expect(reply.headers["referrer-policy"]).toBe("no-referrer")
            expect(reply.headers["x-content-type-options"]).toBe("nosniff")
          }
        }))
    })
  }
)
