import { describe, expect, layer } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Effect, Layer, Logger } from "effect"
import { call, createUser, PASSWORD, signedInUser, TestApp } from "./support/TestApp.js"

const SECRET = "test-secret-that-is-at-least-32-bytes-long"

/** Every log line the server writes during this file, as the JSON it would print. */
const logLines: Array<string> = []
const CaptureLogs = Logger.replace(
  Logger.defaultLogger,
  Logger.map(Logger.jsonLogger, (line) => {
    logLines.push(line)
  })
)

layer(TestApp().pipe(Layer.provide(CaptureLogs)), { excludeTestServices: true })("operations", (it) => {
  describe("health", () => {
    it.effect("/healthz is 200 while the process runs", () =>
      Effect.gen(function*() {
        expect(yield* call("GET", "/healthz")).toMatchObject({ status: 200, body: { status: "ok" } })
      }))

    it.effect("/readyz is 200 with both checks when PostgreSQL and Redis answer", () =>
      Effect.gen(function*() {
        expect(yield* call("GET", "/readyz")).toMatchObject({
          status: 200,
          body: { status: "ready", checks: { postgres: "ok", redis: "ok" } }
        })
      }))
  })

  describe("metrics", () => {
    it.effect("count requests by route template and status, never by id", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* call("GET", "/auth/me", { token: user.token })
        yield* call("GET", `/no/such/${user.id}`)
        const reply = yield* call("GET", "/metrics")
        expect(reply.status).toBe(200)
        expect(reply.headers["content-type"]).toContain("text/plain")
        const text = String(reply.body ?? "")
        expect(text).toMatch(/account_api_http_requests_total\{method="GET",route="\/auth\/me",status="200"\} \d+/)
        expect(text).toMatch(/account_api_http_requests_total\{method="GET",route="unmatched",status="404"\} \d+/)
        expect(text).toContain("account_api_http_request_duration_seconds_bucket")
        // prom-client's own names, which stock Node dashboards query (D9).
        for (
          const name of [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "nodejs_heap_size_used_bytes",
            "nodejs_eventloop_lag_seconds"
          ]
        ) {
          expect(text).toMatch(new RegExp(`^${name}[ {]`, "m"))
        }
        expect(text).not.toContain("account_api_process_")
        for (const state of ["waiting", "active", "delayed", "failed"]) {
          expect(text).toMatch(new RegExp(`account_api_queue_jobs\\{state="${state}"\\} \\d+`))
        }
        expect(text).not.toContain(user.id)
      }))
  })

  describe("OpenAPI", () => {
    it.effect("/openapi.json is a valid OpenAPI 3.1 document of every endpoint, with bearer security", () =>
      Effect.gen(function*() {
        const reply = yield* call("GET", "/openapi.json")
        expect(reply.status).toBe(200)
        const spec = reply.body as {
          openapi: string
          paths: Record<string, unknown>
          components: { securitySchemes: unknown }
        }
        const result = yield* Effect.promise(() => new Validator().validate(spec as never))
        expect(result.errors ?? []).toEqual([])
        expect(result.valid).toBe(true)
        expect(spec.openapi).toMatch(/^3\.1/)
        expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining(["/auth/login", "/auth/me", "/auth/logout"]))
        expect(spec.components.securitySchemes).toEqual({ bearer: { type: "http", scheme: "bearer" } })
        const login = JSON.stringify(spec.paths["/auth/login"])
        expect(login).toContain("application/problem+json")
        expect(login).not.toContain("HttpApiDecodeError")
      }))

    it.effect("/docs renders the interactive documentation", () =>
      Effect.gen(function*() {
        const reply = yield* call("GET", "/docs")
        expect(reply.status).toBe(200)
        expect(reply.headers["content-type"]).toContain("text/html")
        expect(String(reply.body)).toContain("SwaggerUIBundle")
        // The page loads Swagger UI's script and style beside it, and the document it shows.
        expect(String(reply.body)).toContain(`src="docs/swagger-ui-bundle.js"`)
        expect(String(reply.body)).toContain(`url: "openapi.json"`)
        const script = yield* call("GET", "/docs/swagger-ui-bundle.js")
        expect(script.status).toBe(200)
        expect(script.headers["content-type"]).toContain("javascript")
        expect(String(script.body)).toContain("SwaggerUIBundle")
        // Cacheable, with a validator that changes when the package's file does.
        expect(script.headers["cache-control"]).toBe("public, max-age=3600")
        expect(script.headers["etag"]).toMatch(/^W?\/?".+"$/)
        const style = yield* call("GET", "/docs/swagger-ui.css")
        expect(style.status).toBe(200)
        expect(style.headers["content-type"]).toContain("text/css")
        expect(style.headers["x-content-type-options"]).toBe("nosniff")
        // Served outside the contract, and still by D15's rules: a method a path does not take is 405.
        const posted = yield* call("POST", "/docs/swagger-ui.css")
        expect(posted.status).toBe(405)
        expect(posted.headers["allow"]).toBe("GET, HEAD")
        expect((yield* call("GET", "/docs/swagger-ui.css.map")).status).toBe(404)
      }))
  })

  describe("logs", () => {
    it.effect("one JSON line per request with its id, route, status and duration, and no secret anywhere", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const login = yield* call("POST", "/auth/login", { body: { email: user.email, password: PASSWORD } })
        const token = (login.body as { access_token: string }).access_token
        yield* call("GET", "/auth/me", { token })
        yield* call("POST", "/auth/login", { body: { email: user.email, password: "a wrong password" } })
        const requests = logLines.map((line) =>
          JSON.parse(line) as { message: unknown; annotations: Record<string, unknown> }
        )
          .filter((line) => line.message === "request")
        expect(requests).toContainEqual(expect.objectContaining({
          annotations: expect.objectContaining({
            request_id: expect.any(String),
            route: "/auth/me",
            method: "GET",
            status: 200,
            duration_ms: expect.any(Number)
          })
        }))
        const everything = logLines.join("\n")
        for (const secret of [PASSWORD, "a wrong password", token, token.split(".")[2] ?? token, SECRET]) {
          expect(everything).not.toContain(secret)
        }
      }))
  })
})
