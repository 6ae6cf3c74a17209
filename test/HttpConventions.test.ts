import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, createUser, PASSWORD, signedInUser, TestApp } from "./support/TestApp.js"

/** D15, as a browser client on another origin and an operator with curl meet it. */

const APP = "https://app.example.com"

const options = (path: string, origin: string) =>
  call("OPTIONS" as "GET", path, {
    headers: {
      origin,
      "access-control-request-method": "PUT",
      "access-control-request-headers": "authorization, content-type"
    }
  })

layer(TestApp({ CORS_ORIGINS: `${APP}, https://admin.example.com` }), { excludeTestServices: true })(
  "HTTP conventions (D15)",
  (it) => {
    describe("CORS", () => {
      it.effect("a listed origin's preflight is 204 with the methods, headers and max age a browser needs", () =>
        Effect.gen(function*() {
          const reply = yield* options("/developer/account/wallet", APP)
          expect(reply.status).toBe(204)
          expect(reply.headers["access-control-allow-origin"]).toBe(APP)
          expect(reply.headers["vary"]).toContain("Origin")
          expect(reply.headers["access-control-allow-methods"]).toContain("PUT")
          expect(reply.headers["access-control-allow-headers"]).toContain("authorization")
          expect(reply.headers["access-control-allow-headers"]).toContain("content-type")
          // A browser resuming the event stream with fetch sends it (D17).
          expect(reply.headers["access-control-allow-headers"]).toContain("last-event-id")
          expect(Number(reply.headers["access-control-max-age"])).toBeGreaterThan(0)
        }))

      it.effect("a listed origin's answers, errors included, name it and expose Retry-After, Idempotent-Replayed and X-Request-Id", () =>
        Effect.gen(function*() {
          const user = yield* signedInUser()
          for (
            const reply of [
              yield* call("GET", "/developer/account/wallet", { token: user.token, headers: { origin: APP } }),
              yield* call("GET", "/developer/account/wallet", { headers: { origin: APP } })
            ]
          ) {
            expect(reply.headers["access-control-allow-origin"]).toBe(APP)
            expect(reply.headers["vary"]).toContain("Origin")
            for (const header of ["Retry-After", "Idempotent-Replayed", "X-Request-Id"]) {
              expect(reply.headers["access-control-expose-headers"]).toContain(header)
            }
          }
        }))

      it.effect("an unlisted origin gets no CORS header at all, preflight or not", () =>
        Effect.gen(function*() {
          const user = yield* signedInUser()
          const preflight = yield* options("/developer/account/wallet", "https://evil.example.com")
          const answer = yield* call("GET", "/developer/account/wallet", {
            token: user.token,
            headers: { origin: "https://evil.example.com" }
          })
          for (const reply of [preflight, answer]) {
            expect(Object.keys(reply.headers).filter((name) => name.startsWith("access-control-"))).toEqual([])
          }
          expect(preflight.status).not.toBe(204)
        }))
    })

    describe("methods and media types", () => {
      it.effect("a known path with a method it does not have is 405 method_not_allowed with Allow", () =>
        Effect.gen(function*() {
          const user = yield* signedInUser()
          const wallet = yield* call("DELETE", "/developer/account/wallet", { token: user.token })
          expect(wallet.status).toBe(405)
          expect(wallet.headers["allow"]).toBe("GET, HEAD, PUT")
          expect(wallet.body).toMatchObject({
            type: "about:blank",
            title: "Method Not Allowed",
            status: 405,
            code: "method_not_allowed"
          })
          const login = yield* call("GET", "/auth/login")
          expect(login.status).toBe(405)
          expect(login.headers["allow"]).toBe("POST")
          const repository = yield* call(
            "POST",
            "/developer/account/repositories/0190d2c4-8e7a-7a4b-9c1d-2e3f4a5b6c7d/policy",
            {
              token: user.token,
              body: {}
            }
          )
          expect(repository.headers["allow"]).toBe("GET, HEAD, PUT")
          const unknown = yield* call("DELETE", "/no/such/path")
          expect(unknown.status).toBe(404)
          expect(unknown.body).toMatchObject({ code: "not_found" })
        }))
    })

    describe("caching", () => {
      it.effect("sign-in and /auth/me answers carry Cache-Control: no-store, failures too", () =>
        Effect.gen(function*() {
          const user = yield* createUser()
          const replies = [
            yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } }),
            yield* call("POST", "/auth/login", { body: { email: user.email, password: "a wrong password" } }),
            yield* call("GET", "/auth/me"),
            yield* call("GET", "/auth/me", { token: (yield* signedInUser()).token })
          ]
          expect(replies.map((reply) => reply.status)).toEqual([200, 401, 401, 200])
          for (const reply of replies) expect(reply.headers["cache-control"]).toBe("no-store")
        }))
    })
  }
)
