import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { request as httpRequest } from "node:http"
import { ACCOUNT_POLICY, createRepository, repositoryPolicy } from "./support/policies.js"
import { call, type Reply, signedInUser, TestApp } from "./support/TestApp.js"

/**
 * Hostile bodies, as an attacker sends them (D1): whatever arrives, the answer
 * is a 4xx problem, never a 500, never an echo of what was sent, and nothing
 * is written.
 */

const SECRET = "s3cr3t-hunter2"

const isProblem = (reply: Reply) =>
  reply.status >= 400 && reply.status < 500 &&
  (reply.headers["content-type"] ?? "").includes("application/problem+json") &&
  typeof reply.body === "object" && reply.body !== null && "code" in reply.body &&
  (reply.body as { status?: unknown }).status === reply.status

/** A body as raw bytes, for what JSON.stringify would never produce. */
const rawRequest = (port: number, method: string, path: string, options: {
  readonly body: Buffer | ReadonlyArray<Buffer>
  readonly headers?: Record<string, string>
}) =>
  Effect.async<{ readonly status: number; readonly text: string }, Error>((resume) => {
    const chunked = Array.isArray(options.body)
    const request = httpRequest({
      host: "127.0.0.1",
      port,
      method,
      path,
      headers: {
        "content-type": "application/json",
        ...(chunked ? {} : { "content-length": String((options.body as Buffer).length) }),
        ...options.headers
      }
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, text })))
    })
    request.on("error", (error) => resume(Effect.fail(error)))
    if (chunked) {
      for (const chunk of options.body as ReadonlyArray<Buffer>) request.write(chunk)
      request.end()
    } else {
      request.end(options.body as Buffer)
    }
  })

const serverPort = Effect.map(
  HttpServer.HttpServer,
  (server) => server.address._tag === "TcpAddress" ? server.address.port : 0
)

const deep = (levels: number) => `{"policy":${"[".repeat(levels)}${"]".repeat(levels)}}`

layer(TestApp(), { excludeTestServices: true })("hostile input (D1)", (it) => {
  describe("bodies that once reached a formatter or the database", () => {
    it.effect("a body nested 5,000 levels deep is 422 at #, on every JSON endpoint, sign-in included", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser({ admin: true })
        const repositoryId = yield* createRepository(user.id)
        const endpoints = [
          ["POST", "/auth/login"],
          ["PUT", ACCOUNT_POLICY],
          ["PUT", repositoryPolicy(repositoryId)],
          ["PUT", "/developer/account/wallet"],
          ["POST", "/developer/account/wallet/credits"]
        ] as const
        for (const [method, path] of endpoints) {
          const reply = yield* call(method, path, { token: user.token, rawBody: deep(5000) })
          expect(reply.status, path).toBe(422)
          expect(reply.body, path).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#" }] })
        }
        const wide = yield* call("PUT", ACCOUNT_POLICY, {
          token: user.token,
          rawBody: `{"policy":[${"0,".repeat(10_001)}0]}`
        })
        expect(wide.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#" }] })
      }))

    it.effect("NUL in the sign-in email is 422 at #/email, not a database error", () =>
      Effect.gen(function*() {
        const reply = yield* call("POST", "/auth/login", {
          body: { email: "a\u0000b@example.com", password: "whatever password" }
        })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#/email" }] })
        const surrogate = yield* call("POST", "/auth/login", {
          rawBody: `{"email":"a\\ud800@example.com","password":"x"}`
        })
        expect(surrogate.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#/email" }] })
      }))

    it.effect("a 422 never echoes the value received: the password stays unsaid", () =>
      Effect.gen(function*() {
        for (const password of [[SECRET], { value: SECRET }, 12345678901234]) {
          const reply = yield* call("POST", "/auth/login", { body: { email: "someone@example.com", password } })
          expect(reply.status).toBe(422)
          expect(JSON.stringify(reply.body)).not.toContain(SECRET)
          expect(JSON.stringify(reply.body)).not.toContain("12345678901234")
          expect(JSON.stringify(reply.body)).not.toContain("actual")
        }
      }))

    it.effect("a body that is not valid UTF-8 is 422 at #", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const bytes = Buffer.concat([
          Buffer.from(`{"email":"a`),
          Buffer.from([0xc3, 0x28]),
          Buffer.from(`@example.com","password":"x"}`)
        ])
        const reply = yield* rawRequest(port, "POST", "/auth/login", { body: bytes })
        expect(reply.status).toBe(422)
        expect(JSON.parse(reply.text)).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#", detail: expect.stringContaining("UTF-8") }]
        })
      }))

    it.effect("a chunked body over 64 KiB is a 413 problem, answered, not a reset connection", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const chunks = Array.from({ length: 9 }, () => Buffer.alloc(8 * 1024, "a"))
        const reply = yield* rawRequest(port, "POST", "/auth/login", { body: chunks })
        expect(reply.status).toBe(413)
        expect(JSON.parse(reply.text)).toMatchObject({ status: 413, code: "payload_too_large" })
        const metrics = String((yield* call("GET", "/metrics")).body)
        expect(metrics).toMatch(
          /account_api_http_requests_total\{method="POST",route="\/auth\/login",status="413"\} \d+/
        )
      }))

    it.effect("a body that is not JSON by its Content-Type is 415 unsupported_media_type (D15)", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const port = yield* serverPort
        for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/jsonp"]) {
          const reply = yield* rawRequest(port, "PUT", "/developer/account/wallet", {
            body: Buffer.from(`{"budget_usd":"5","idempotency_key":"k"}`),
            headers: { "content-type": contentType, authorization: `Bearer ${user.token}` }
          })
          expect(reply.status, contentType).toBe(415)
          expect(JSON.parse(reply.text)).toMatchObject({ status: 415, code: "unsupported_media_type" })
        }
        const problemJson = yield* rawRequest(port, "PUT", "/developer/account/wallet", {
          body: Buffer.from(`{"budget_usd":"5","idempotency_key":"k-json"}`),
          headers: {
            "content-type": "application/merge-patch+json; charset=utf-8",
            authorization: `Bearer ${user.token}`
          }
        })
        expect(problemJson.status).toBe(200)
        const wallet = yield* call("GET", "/developer/account/wallet", { token: user.token })
        expect(wallet.body).toMatchObject({ version: 1 })
      }))
  })

  describe("a generated corpus", () => {
    /** Values no field accepts: each string carries NUL or a lone surrogate, and the secret. */
    const poisonString = fc.tuple(
      fc.string({ maxLength: 20 }),
      fc.constantFrom("\u0000", "\ud800", "\udfff", "x\u0000")
    )
      .map(([text, poison]) => `${text}${poison}${SECRET}`)
    const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
      poisonString,
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.array(poisonString, { maxLength: 3 }),
      fc.dictionary(poisonString, poisonString, { maxKeys: 3 })
    )
    const rawBodies = (fields: ReadonlyArray<string>): fc.Arbitrary<string> =>
      fc.oneof(
        fc.record(Object.fromEntries(fields.map((field) => [field, hostileValue]))).map((body) => JSON.stringify(body)),
        fc.record(Object.fromEntries(fields.map((field) => [field, hostileValue]))).map((body) =>
          JSON.stringify(body).replace(/^\{/, `{"__proto__":{"is_admin":true},"constructor":{"prototype":{}},`)
        ),
        fc.integer({ min: 33, max: 4_000 }).map(deep),
        fc.integer({ min: 10_001, max: 12_000 }).map((n) => `[${"1,".repeat(n)}1]`),
        fc.string({ maxLength: 40 }).map((text) => `{"${text}`),
        fc.constant(JSON.stringify({ [fields[0] ?? "x"]: "y".repeat(70 * 1024) }))
      )

    it.effect(
      "1,000 hostile bodies per write endpoint: every answer a 4xx problem, no echo, nothing written",
      () =>
        Effect.gen(function*() {
          const user = yield* signedInUser({ admin: true })
          const repositoryId = yield* createRepository(user.id)
          const endpoints = [
            { method: "POST", path: "/auth/login", fields: ["email", "password"] },
            { method: "PUT", path: ACCOUNT_POLICY, fields: ["policy", "expected_version"] },
            { method: "PUT", path: repositoryPolicy(repositoryId), fields: ["policy", "expected_version"] },
            {
              method: "PUT",
              path: "/developer/account/wallet",
              fields: ["budget_usd", "idempotency_key", "expected_version", "note"]
            },
            {
              method: "POST",
              path: "/developer/account/wallet/credits",
              fields: ["amount_usd", "idempotency_key", "note"]
            }
          ] as const
          for (const endpoint of endpoints) {
            const bodies = fc.sample(rawBodies(endpoint.fields), { numRuns: 1_000, seed: 20261124 })
            const replies = yield* Effect.forEach(
              bodies,
              (rawBody) => call(endpoint.method, endpoint.path, { token: user.token, rawBody }),
              { concurrency: 8 }
            )
            replies.forEach((reply, index) => {
              if (!isProblem(reply)) {
                throw new Error(
                  `${endpoint.path}: ${bodies[index]?.slice(0, 200)} -> ${reply.status} ${JSON.stringify(reply.body)}`
                )
              }
              expect(JSON.stringify(reply.body)).not.toContain(SECRET)
            })
          }
          // Nothing was written.
          expect((yield* call("GET", "/developer/account/wallet", { token: user.token })).body).toMatchObject({
            version: 0
          })
          expect((yield* call("GET", "/developer/account/wallet/ledger", { token: user.token })).body).toMatchObject({
            entries: []
          })
          expect((yield* call("GET", ACCOUNT_POLICY, { token: user.token })).body).toMatchObject({ version: 0 })
          expect((yield* call("GET", repositoryPolicy(repositoryId), { token: user.token })).body).toMatchObject({
            override: null
          })
        }),
      120_000
    )
  })

  describe("the small findings of the attack read (issue 22.10)", () => {
    it.effect("NUL in a session id is 404 session_not_found; NUL in the ledger's before is 422 at #/query/before", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        // A wallet, so that the id is looked up rather than refused for want of one.
        expect(
          (yield* call("PUT", "/developer/account/wallet", {
            token: user.token,
            body: { budget_usd: "5", idempotency_key: "nul-wallet" }
          })).status
        ).toBe(200)
        const session = yield* call("GET", "/developer/account/wallet/sessions/abc%00def", { token: user.token })
        expect(session.status).toBe(404)
        expect(session.body).toMatchObject({ code: "session_not_found" })
        const sessions = yield* call("GET", "/developer/account/wallet/sessions?before=a%00b", { token: user.token })
        expect(sessions.status).toBe(404)
        expect(sessions.body).toMatchObject({ code: "session_not_found" })
        const ledger = yield* call("GET", "/developer/account/wallet/ledger?before=%00", { token: user.token })
        expect(ledger.status).toBe(422)
        expect(ledger.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#/query/before" }] })
      }))

    it.effect("a path with an undecodable percent-escape is 404 not_found, not 405", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const path of ["/developer/account/wallet/sessions/%E0%A4%A", "/developer/account/%ZZ/policy"]) {
          const reply = yield* call("GET", path, { token: user.token })
          expect(reply.status).toBe(404)
          expect(reply.body).toMatchObject({ code: "not_found" })
        }
      }))

    it.effect("a GET body over 64 KiB is 413, sent with a length or chunked", () =>
      Effect.gen(function*() {
        const port = yield* serverPort
        const user = yield* signedInUser()
        const headers = { authorization: `Bearer ${user.token}` }
        const large = Buffer.alloc(200 * 1024, 0x20)
        const sized = yield* rawRequest(port, "GET", "/developer/account/wallet", { body: large, headers })
        expect(sized.status).toBe(413)
        const chunked = yield* rawRequest(port, "GET", "/developer/account/wallet", {
          body: Array.from({ length: 20 }, () => Buffer.alloc(10 * 1024, 0x20)),
          // Node's client frames a GET's body only when told to.
          headers: { ...headers, "transfer-encoding": "chunked" }
        })
        expect(chunked.status).toBe(413)
        const small = yield* rawRequest(port, "GET", "/developer/account/wallet", { body: Buffer.from("{}"), headers })
        expect(small.status).toBe(200)
      }))

    it.effect("every answer carries X-Content-Type-Options: nosniff", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const replies = yield* Effect.all([
          call("GET", "/developer/account/wallet", { token: user.token }),
          call("GET", "/developer/account/wallet/ledger.csv", { token: user.token }),
          call("GET", "/developer/account/wallet"),
          call("GET", "/no/such/route"),
          call("DELETE", "/developer/account/wallet", { token: user.token }),
          call("POST", "/auth/login", { rawBody: "{" }),
          call("GET", "/openapi.json"),
          call("GET", "/healthz")
        ])
        expect(replies.map((reply) => reply.headers["x-content-type-options"])).toEqual(
          replies.map(() => "nosniff")
        )
      }))
  })
})
