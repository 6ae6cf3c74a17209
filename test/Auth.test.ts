import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { decodeJwt, decodeProtectedHeader, SignJWT } from "jose"
import { randomUUID } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { Credentials } from "../src/Auth/Credentials.js"
import { call, createUser, PASSWORD, signedInUser, signIn, TestApp } from "./support/TestApp.js"

const SECRET = new TextEncoder().encode("test-secret-that-is-at-least-32-bytes-long")

const problem = (status: number, code: string) => ({ type: "about:blank", status, code })

layer(TestApp(), { excludeTestServices: true })("sign-in", (it) => {
  describe("POST /auth/login", () => {
    it.effect("returns a bearer token, its expiry and the user", () =>
      Effect.gen(function*() {
        const user = yield* createUser({ admin: true })
        const reply = yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } })
        expect(reply.status).toBe(200)
        expect(reply.body).toMatchObject({
          token_type: "bearer",
          expires_in: 86400,
          user: { id: user.id, email: user.email, is_admin: true }
        })
        const body = reply.body as { access_token: string; expires_at: string }
        expect(Date.parse(body.expires_at) - Date.now()).toBeGreaterThan(86_000_000)
        expect(decodeProtectedHeader(body.access_token)).toMatchObject({ alg: "HS256", kid: expect.any(String) })
        expect(decodeJwt(body.access_token)).toMatchObject({
          sub: user.id,
          sid: expect.any(String),
          iss: "account-api",
          aud: "account-api"
        })
      }))

    it.effect("matches the email case-insensitively", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const reply = yield* call("POST", "/auth/login", {
          body: { email: user.email.toUpperCase(), password: PASSWORD }
        })
        expect(reply.status).toBe(200)
      }))

    it.effect("a wrong password and an unknown email get the same 401", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const wrong = yield* call("POST", "/auth/login", { body: { email: user.email, password: "not the password" } })
        const unknown = yield* call("POST", "/auth/login", {
          body: { email: "nobody@example.com", password: PASSWORD }
        })
        expect(wrong.status).toBe(401)
        expect(wrong.body).toEqual({
          type: "about:blank",
          title: "Unauthorized",
          status: 401,
          code: "invalid_credentials",
          detail: expect.any(String)
        })
        expect(unknown.status).toBe(wrong.status)
        expect(unknown.body).toEqual(wrong.body)
        expect(wrong.headers["content-type"]).toContain("application/problem+json")
      }))

    it.effect("a malformed email is 422 with a pointer to the field", () =>
      Effect.gen(function*() {
        const reply = yield* call("POST", "/auth/login", { body: { email: "not-an-email", password: "x" } })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({
          ...problem(422, "validation_failed"),
          title: "Unprocessable Content",
          errors: [{ pointer: "#/email", detail: expect.any(String) }]
        })
      }))

    it.effect("lists every offending field: missing, mistyped and unknown", () =>
      Effect.gen(function*() {
        const reply = yield* call("POST", "/auth/login", { body: { password: 5, extra: true } })
        expect(reply.status).toBe(422)
        const pointers = (reply.body as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer).sort()
        expect(pointers).toEqual(["#/email", "#/extra", "#/password"])
      }))

    it.effect("a body that is not JSON is 422 pointing at the whole body", () =>
      Effect.gen(function*() {
        const reply = yield* call("POST", "/auth/login", { rawBody: "{not json" })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#" }] })
      }))

    it.effect("a body over 64 KiB is 413", () =>
      Effect.gen(function*() {
        const reply = yield* call("POST", "/auth/login", {
          body: { email: "a@example.com", password: "x".repeat(70 * 1024) }
        })
        expect(reply.status).toBe(413)
        expect(reply.body).toMatchObject(problem(413, "payload_too_large"))
      }))

    it.effect("after five failures from one address even the right password gets 429 with Retry-After", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        for (let attempt = 0; attempt < 5; attempt++) {
          const reply = yield* call("POST", "/auth/login", { body: { email: user.email, password: "wrong password" } })
          expect(reply.status).toBe(401)
        }
        const blocked = yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } })
        expect(blocked.status).toBe(429)
        expect(blocked.body).toMatchObject(problem(429, "rate_limited"))
        expect(Number(blocked.headers["retry-after"])).toBeGreaterThan(0)
        expect(Number(blocked.headers["retry-after"])).toBeLessThanOrEqual(900)
        // Another account's sign-in from the same address is not locked out.
        const other = yield* createUser()
        expect((yield* call("POST", "/auth/login", { body: { email: other.email, password: PASSWORD } })).status).toBe(
          200
        )
      }))

    it.effect("a success clears the failures counted for that email and address", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        for (let attempt = 0; attempt < 4; attempt++) {
          yield* call("POST", "/auth/login", { body: { email: user.email, password: "wrong password" } })
        }
        yield* signIn(user.email)
        for (let attempt = 0; attempt < 4; attempt++) {
          yield* call("POST", "/auth/login", { body: { email: user.email, password: "wrong password" } })
        }
        expect((yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } })).status).toBe(
          200
        )
      }))

    it.effect("30 and 100 wrong passwords sent at once: at most five are checked, the rest get 429", () =>
      Effect.gen(function*() {
        for (const burst of [30, 100]) {
          const user = yield* createUser()
          const replies = yield* Effect.all(
            Array.from(
              { length: burst },
              () => call("POST", "/auth/login", { body: { email: user.email, password: "wrong password" } })
            ),
            { concurrency: "unbounded" }
          )
          const statuses = replies.map((reply) => reply.status)
          expect(statuses.filter((status) => status === 401).length, `burst of ${burst}`).toBeLessThanOrEqual(5)
          expect(statuses.filter((status) => status !== 401 && status !== 429), `burst of ${burst}`).toEqual([])
        }
      }))

    it.effect("39 wrong guesses and the right password in one burst: the right one is checked only among the first five", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const passwords = [...Array.from({ length: 39 }, (_, n) => `wrong guess ${n}`), PASSWORD]
        const replies = yield* Effect.all(
          passwords.map((password) => call("POST", "/auth/login", { body: { email: user.email, password } })),
          { concurrency: "unbounded" }
        )
        const checked = replies.filter((reply) => reply.status !== 429)
        expect(checked.length).toBeLessThanOrEqual(5)
        expect(replies.filter((reply) => reply.status === 200).length).toBeLessThanOrEqual(1)
      }))

    it.effect("every spelling of an email shares one counter: other cases, fullwidth letters, U+0130", () =>
      Effect.gen(function*() {
        yield* createUser({ email: "timi@t.example" })
        for (let attempt = 0; attempt < 5; attempt++) {
          const reply = yield* call("POST", "/auth/login", {
            body: { email: "timi@t.example", password: "wrong password" }
          })
          expect(reply.status).toBe(401)
        }
        for (const spelling of ["TIMI@T.EXAMPLE", "ｔｉｍｉ@t.example", "Timi@t.example"]) {
          const reply = yield* call("POST", "/auth/login", { body: { email: spelling, password: PASSWORD } })
          expect(reply.status, spelling).toBe(429)
        }
        // U+0130 lower-cases to "i" + a combining dot: another address, not a fresh counter for this user.
        const dotted = yield* call("POST", "/auth/login", { body: { email: "tİmi@t.example", password: PASSWORD } })
        expect(dotted.status).not.toBe(200)
      }))

    it.effect("a user created with capitals and fullwidth letters signs in with any spelling", () =>
      Effect.gen(function*() {
        const user = yield* createUser({ email: "ＭｉＸｅｄ.Case@Example.COM" })
        expect(user.email).toBe("ＭｉＸｅｄ.Case@Example.COM")
        for (const spelling of ["mixed.case@example.com", "MIXED.CASE@EXAMPLE.COM", "ｍｉｘｅｄ.case@example.com"]) {
          const reply = yield* call("POST", "/auth/login", { body: { email: spelling, password: PASSWORD } })
          expect(reply.status, spelling).toBe(200)
          expect(reply.body).toMatchObject({ user: { email: "mixed.case@example.com" } })
        }
        const credentials = yield* Credentials
        const duplicate = yield* credentials.createUser({
          email: "MIXED.case@example.com",
          name: "Twin",
          isAdmin: false,
          organisationId: Option.none(),
          password: PASSWORD
        }).pipe(Effect.flip)
        expect(duplicate.message).toContain("exists")
      }))

    it.effect("invalid bodies are not counted as failed sign-ins", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        for (let attempt = 0; attempt < 6; attempt++) {
          const reply = yield* call("POST", "/auth/login", { body: { email: user.email } })
          expect(reply.status).toBe(422)
        }
        expect((yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } })).status).toBe(
          200
        )
      }))
  })

  describe("GET /auth/me", () => {
    it.effect("returns the user, their account and the sign-in session", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* call("GET", "/auth/me", { token: user.token })
        expect(reply.status).toBe(200)
        expect(reply.body).toEqual({
          user: { id: user.id, email: user.email, name: expect.any(String), is_admin: false },
          account: { kind: "user", id: user.id },
          session: { id: decodeJwt(user.token).sid, expires_at: expect.any(String) }
        })
      }))

    it.effect("a member of an organisation belongs to the organisation's account", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const organisation = yield* accounts.createOrganisation("Acme")
        const user = yield* signedInUser({ organisationId: organisation.id })
        const reply = yield* call("GET", "/auth/me", { token: user.token })
        expect(reply.body).toMatchObject({ account: { kind: "client", id: organisation.id } })
      }))

    it.effect("accounts found are kept in memory; an id not yet an account is asked again, so one made later is found", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const sql = yield* SqlClient.SqlClient
        const user = yield* createUser()
        const later = randomUUID()
        const before = yield* accounts.findAccounts([user.id, later])
        expect(before.get(user.id)).toMatchObject({ kind: "user", id: user.id })
        expect(before.has(later)).toBe(false)
        // Made now, by its id: a miss was not kept.
        yield* sql`INSERT INTO organisations (id, name) VALUES (${later}, 'Later')`
        const after = yield* accounts.findAccounts([user.id, later, "not a uuid"])
        expect([...after.values()].map(({ id, kind }) => ({ id, kind }))).toEqual([
          { id: user.id, kind: "user" },
          { id: later, kind: "client" }
        ])
      }))

    it.effect("without a token it is 401 unauthenticated with WWW-Authenticate", () =>
      Effect.gen(function*() {
        const reply = yield* call("GET", "/auth/me")
        expect(reply.status).toBe(401)
        expect(reply.headers["www-authenticate"]).toBe("Bearer")
        expect(reply.body).toMatchObject(problem(401, "unauthenticated"))
      }))

    it.effect("a token that is malformed, forged, of another algorithm or expired is 401", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const { sid } = decodeJwt(user.token)
        const claims = { sid: String(sid) }
        const forged = yield* Effect.promise(() =>
          new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setSubject(user.id).setIssuer("account-api")
            .setAudience("account-api").setExpirationTime("1h").sign(new TextEncoder().encode("x".repeat(40)))
        )
        const expired = yield* Effect.promise(() =>
          new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setSubject(user.id).setIssuer("account-api")
            .setAudience("account-api").setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
            .setExpirationTime(Math.floor(Date.now() / 1000) - 3600).sign(SECRET)
        )
        const wrongAudience = yield* Effect.promise(() =>
          new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setSubject(user.id).setIssuer("account-api")
            .setAudience("someone-else").setExpirationTime("1h").sign(SECRET)
        )
        const [header, payload] = user.token.split(".")
        const unsigned = `${Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url")}.${payload}.`
        for (const token of ["garbage", forged, expired, wrongAudience, unsigned, `${header}.${payload}.AAAA`]) {
          const reply = yield* call("GET", "/auth/me", { token })
          expect(reply.status, token).toBe(401)
          expect(reply.body).toMatchObject(problem(401, "unauthenticated"))
        }
      }))
  })

  describe("token claims (D2)", () => {
    it.effect("a token signed with the right secret but without exp, iat, or with another kid, is 401", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const { sid } = decodeJwt(user.token)
        const { kid } = decodeProtectedHeader(user.token)
        const base = () =>
          new SignJWT({ sid: String(sid) }).setSubject(user.id).setIssuer("account-api").setAudience("account-api")
        const sign = (build: (token: SignJWT) => SignJWT) => Effect.promise(() => build(base()).sign(SECRET))
        const valid = yield* sign((token) =>
          token.setProtectedHeader({ alg: "HS256", kid: String(kid) }).setIssuedAt().setExpirationTime("1h")
        )
        // The control: the same construction with every claim is accepted, so each refusal below is its missing part.
        expect((yield* call("GET", "/auth/me", { token: valid })).status).toBe(200)
        const refused = {
          withoutExp: yield* sign((token) =>
            token.setProtectedHeader({ alg: "HS256", kid: String(kid) }).setIssuedAt()
          ),
          withoutIat: yield* sign((token) =>
            token.setProtectedHeader({ alg: "HS256", kid: String(kid) }).setExpirationTime("1h")
          ),
          otherKid: yield* sign((token) =>
            token.setProtectedHeader({ alg: "HS256", kid: "another-key" }).setIssuedAt().setExpirationTime("1h")
          ),
          withoutKid: yield* sign((token) =>
            token.setProtectedHeader({ alg: "HS256" }).setIssuedAt().setExpirationTime("1h")
          )
        }
        for (const [name, token] of Object.entries(refused)) {
          const reply = yield* call("GET", "/auth/me", { token })
          expect(reply.status, name).toBe(401)
          expect(reply.headers["www-authenticate"], name).toBe("Bearer")
          expect(reply.body, name).toMatchObject(problem(401, "unauthenticated"))
        }
      }))
  })

  describe("POST /auth/logout", () => {
    it.effect("is 204 and revokes that token everywhere, logout included, but not other sessions", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const otherSession = yield* signIn(user.email)
        const reply = yield* call("POST", "/auth/logout", { token: user.token })
        expect(reply.status).toBe(204)
        expect(reply.body).toBeUndefined()
        expect((yield* call("GET", "/auth/me", { token: user.token })).status).toBe(401)
        expect((yield* call("POST", "/auth/logout", { token: user.token })).status).toBe(401)
        expect((yield* call("GET", "/auth/me", { token: otherSession })).status).toBe(200)
      }))

    it.effect("resetting a password ends all of the user's sessions", () =>
      Effect.gen(function*() {
        const credentials = yield* Credentials
        const user = yield* signedInUser()
        const second = yield* signIn(user.email)
        yield* credentials.resetPassword(user.email, "a brand new password")
        expect((yield* call("GET", "/auth/me", { token: user.token })).status).toBe(401)
        expect((yield* call("GET", "/auth/me", { token: second })).status).toBe(401)
        expect((yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } })).status).toBe(
          401
        )
        yield* signIn(user.email, "a brand new password")
      }))
  })

  describe("everything else", () => {
    it.effect("an unknown route is a 404 problem", () =>
      Effect.gen(function*() {
        const reply = yield* call("GET", "/no/such/route")
        expect(reply.status).toBe(404)
        expect(reply.body).toMatchObject({ ...problem(404, "not_found"), title: "Not Found" })
      }))

    it.effect("health is 200 and readiness is 200 when Postgres and Redis answer", () =>
      Effect.gen(function*() {
        expect(yield* call("GET", "/healthz")).toMatchObject({ status: 200, body: { status: "ok" } })
        expect(yield* call("GET", "/readyz")).toMatchObject({
          status: 200,
          body: { status: "ready", checks: { postgres: "ok", redis: "ok" } }
        })
      }))
  })
})
