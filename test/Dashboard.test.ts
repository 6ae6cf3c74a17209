import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { request as httpRequest } from "node:http"
import { call, createUser, PASSWORD, signedInUser, TestApp } from "./support/TestApp.js"

const COOKIE = "account_api_admin"

/** Every log line the server writes during this file. */
const logLines: Array<{ readonly message: unknown; readonly logLevel: string; readonly annotations: Record<string, unknown> }> = []
const CaptureLogs = Logger.replace(
  Logger.defaultLogger,
  Logger.map(Logger.jsonLogger, (line) => {
    logLines.push(JSON.parse(line))
  })
)

interface PageReply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly text: string
}

/** A request as a browser makes it: form posts, a cookie, and by default asking for HTML. */
const browse = (
  method: "GET" | "POST" | "PUT",
  path: string,
  options: {
    readonly cookie?: string
    readonly form?: Record<string, string>
    readonly json?: unknown
    readonly accept?: string
  } = {}
) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    let request = HttpClientRequest.make(method)(path).pipe(
      HttpClientRequest.setHeader("accept", options.accept ?? "text/html,application/xhtml+xml")
    )
    if (options.cookie !== undefined) request = HttpClientRequest.setHeader(request, "cookie", `${COOKIE}=${options.cookie}`)
    if (options.form !== undefined) request = HttpClientRequest.bodyUrlParams(request, options.form)
    if (options.json !== undefined) request = yield* HttpClientRequest.bodyJson(request, options.json)
    const response = yield* client.execute(request)
    return { status: response.status, headers: response.headers, text: yield* response.text } satisfies PageReply
  }).pipe(Effect.scoped, Effect.orDie)

/** The dashboard cookie a response sets, if any. */
const setCookieOf = (reply: PageReply) => reply.headers["set-cookie"]

const cookieValueOf = (reply: PageReply) => {
  const match = new RegExp(`^${COOKIE}=([^;]*)`).exec(setCookieOf(reply) ?? "")
  if (match?.[1] === undefined) throw new Error(`no ${COOKIE} cookie set: ${JSON.stringify(reply.headers)}`)
  return match[1]
}

const signInThroughForm = (email: string, password = PASSWORD) =>
  browse("POST", "/admin/queues/login", { form: { email, password } })

/** An administrator signed in through the dashboard's form: the cookie's value. */
const adminCookie = Effect.gen(function*() {
  const admin = yield* createUser({ admin: true })
  return cookieValueOf(yield* signInThroughForm(admin.email))
})

layer(TestApp().pipe(Layer.provide(CaptureLogs)), { excludeTestServices: true })("queue dashboard", (it) => {
  describe("without a sign-in", () => {
    it.effect("a browser gets 401 with the sign-in form", () =>
      Effect.gen(function*() {
        const reply = yield* browse("GET", "/admin/queues")
        expect(reply.status).toBe(401)
        expect(reply.headers["content-type"]).toContain("text/html")
        expect(reply.text).toContain(`action="/admin/queues/login"`)
        expect(reply.headers["www-authenticate"]).toBeUndefined()
      }))

    it.effect("the board's API and assets get a 401 unauthenticated problem", () =>
      Effect.gen(function*() {
        for (const path of ["/admin/queues", "/admin/queues/api/queues", "/admin/queues/static/images/logo.svg"]) {
          const reply = yield* call("GET", path)
          expect(reply.status, path).toBe(401)
          expect(reply.body).toMatchObject({ type: "about:blank", status: 401, code: "unauthenticated" })
          expect(reply.headers["content-type"]).toContain("application/problem+json")
        }
      }))

    it.effect("a bearer token is not enough: the dashboard signs in with its own cookie", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        expect((yield* call("GET", "/admin/queues/api/queues", { token: admin.token })).status).toBe(401)
      }))

    it.effect("the sign-in page is a plain form", () =>
      Effect.gen(function*() {
        const reply = yield* browse("GET", "/admin/queues/login")
        expect(reply.status).toBe(200)
        expect(reply.text).toContain(`name="email"`)
        expect(reply.text).toContain(`type="password"`)
        expect(reply.headers["cache-control"]).toBe("no-store")
      }))
  })

  describe("signing in", () => {
    it.effect("an administrator gets 303 to the dashboard and an HttpOnly, SameSite=Strict cookie scoped to it", () =>
      Effect.gen(function*() {
        const admin = yield* createUser({ admin: true })
        const reply = yield* signInThroughForm(admin.email)
        expect(reply.status).toBe(303)
        expect(reply.headers["location"]).toBe("/admin/queues")
        const cookie = setCookieOf(reply) ?? ""
        expect(cookie).toMatch(new RegExp(`^${COOKIE}=[\\w-]+\\.[\\w-]+\\.[\\w-]+;`))
        expect(cookie).toContain("HttpOnly")
        expect(cookie).toContain("SameSite=Strict")
        expect(cookie).toContain("Path=/admin/queues")
        expect(cookie).toContain("Max-Age=86400")
        // Secure is added in production only, where the service sits behind TLS.
        expect(cookie).not.toContain("Secure")
      }))

    it.effect("a user who is not an administrator gets 403 and no cookie", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const reply = yield* signInThroughForm(user.email)
        expect(reply.status).toBe(403)
        expect(setCookieOf(reply)).toBeUndefined()
        expect(reply.text).toContain("not an administrator")
      }))

    it.effect("a wrong password re-renders the form with 401, never echoing the password", () =>
      Effect.gen(function*() {
        const admin = yield* createUser({ admin: true })
        const reply = yield* signInThroughForm(admin.email, "a wrong password")
        expect(reply.status).toBe(401)
        expect(setCookieOf(reply)).toBeUndefined()
        expect(reply.text).toContain(`action="/admin/queues/login"`)
        expect(reply.text).toContain(admin.email)
        expect(reply.text).not.toContain("a wrong password")
      }))

    it.effect("an incomplete form is 422 and not counted as a failed sign-in", () =>
      Effect.gen(function*() {
        const admin = yield* createUser({ admin: true })
        for (let attempt = 0; attempt < 6; attempt++) {
          expect((yield* browse("POST", "/admin/queues/login", { form: { email: admin.email } })).status).toBe(422)
        }
        expect((yield* signInThroughForm(admin.email)).status).toBe(303)
      }))

    it.effect("shares the sign-in throttle: after five failures even the right password gets 429", () =>
      Effect.gen(function*() {
        const admin = yield* createUser({ admin: true })
        for (let attempt = 0; attempt < 5; attempt++) {
          expect((yield* signInThroughForm(admin.email, "a wrong password")).status).toBe(401)
        }
        const blocked = yield* signInThroughForm(admin.email)
        expect(blocked.status).toBe(429)
        expect(Number(blocked.headers["retry-after"])).toBeGreaterThan(0)
        expect(setCookieOf(blocked)).toBeUndefined()
        // The API's sign-in counts the same failures.
        expect((yield* call("POST", "/auth/login", { body: { email: admin.email, password: PASSWORD } })).status)
          .toBe(429)
      }))
  })

  describe("signed in", () => {
    it.effect("an administrator's cookie opens the dashboard page and its API, which lists the settlement queue", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        const page = yield* browse("GET", "/admin/queues", { cookie })
        expect(page.status).toBe(200)
        expect(page.headers["content-type"]).toContain("text/html")
        expect(page.text).toContain(`<base href="/admin/queues/"`)
        expect(page.text).not.toContain(cookie)

        const queues = yield* browse("GET", "/admin/queues/api/queues", { cookie, accept: "application/json" })
        expect(queues.status).toBe(200)
        const body = JSON.parse(queues.text) as { queues: Array<{ name: string }> }
        expect(body.queues.map((queue) => queue.name)).toEqual(["settlement"])
        expect(queues.text).not.toContain(cookie)
      }))

    it.effect("the board's static assets are served", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        const page = yield* browse("GET", "/admin/queues", { cookie })
        // The page links its assets relative to `<base href="/admin/queues/">`.
        const script = /src="(static\/[^"]+\.js)"/.exec(page.text)?.[1]
        expect(script).toBeDefined()
        const asset = yield* browse("GET", `/admin/queues/${script}`, { cookie, accept: "*/*" })
        expect(asset.status).toBe(200)
        expect(asset.headers["content-type"]).toContain("javascript")
      }))

    it.effect("job payloads are shown, and the board's actions reach the queue", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        const payload = {
          account_id: "0190d2c4-8e7a-7a4b-9c1d-2e3f4a5b6c7d",
          session_id: "session-shown",
          idempotency_key: "release-shown"
        }
        const added = yield* browse("POST", "/admin/queues/api/queues/settlement/add", {
          cookie,
          accept: "application/json",
          json: { name: "release", data: payload, options: { jobId: "release-shown" } }
        })
        expect(added.status).toBe(200)
        const paused = yield* browse("PUT", "/admin/queues/api/queues/settlement/pause", { cookie, accept: "application/json" })
        expect(paused.status).toBe(200)

        const listed = yield* browse(
          "GET",
          "/admin/queues/api/queues?activeQueue=settlement&status=latest&page=1&jobsPerPage=10",
          { cookie, accept: "application/json" }
        )
        const settlement = (JSON.parse(listed.text) as {
          queues: Array<{ name: string; isPaused: boolean; jobs: Array<{ id: string; name: string; data: unknown }> }>
        }).queues[0]
        expect(settlement?.isPaused).toBe(true)
        expect(settlement?.jobs).toContainEqual(expect.objectContaining({ id: "release-shown", name: "release", data: payload }))
        expect(listed.text).not.toContain(cookie)

        expect((yield* browse("PUT", "/admin/queues/api/queues/settlement/resume", { cookie, accept: "application/json" })).status)
          .toBe(200)
        expect((yield* browse("PUT", "/admin/queues/api/queues/settlement/empty", { cookie, accept: "application/json" })).status)
          .toBe(200)
      }))

    it.effect("a path the board does not know is a 404 not_found problem", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        for (const path of ["/admin/queues/static/no-such-file.js", "/admin/queues/no/such/page"]) {
          const reply = yield* browse("GET", path, { cookie, accept: "*/*" })
          expect(reply.status, path).toBe(404)
          expect(JSON.parse(reply.text)).toMatchObject({ type: "about:blank", status: 404, code: "not_found" })
        }
      }))

    it.effect("a cookie holding a non-administrator's token is 403 forbidden", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const api = yield* browse("GET", "/admin/queues/api/queues", { cookie: user.token, accept: "application/json" })
        expect(api.status).toBe(403)
        expect(JSON.parse(api.text)).toMatchObject({ type: "about:blank", status: 403, code: "forbidden" })
        const page = yield* browse("GET", "/admin/queues", { cookie: user.token })
        expect(page.status).toBe(403)
        expect(page.text).toContain("not an administrator")
      }))

    it.effect("a revoked session's cookie is 401", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        expect((yield* call("POST", "/auth/logout", { token: cookie })).status).toBe(204)
        expect((yield* browse("GET", "/admin/queues", { cookie })).status).toBe(401)
        expect((yield* browse("GET", "/admin/queues/api/queues", { cookie, accept: "application/json" })).status)
          .toBe(401)
      }))

    it.effect("signing out ends the session and clears the cookie", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        const reply = yield* browse("POST", "/admin/queues/logout", { cookie })
        expect(reply.status).toBe(303)
        expect(reply.headers["location"]).toBe("/admin/queues/login")
        const cleared = setCookieOf(reply) ?? ""
        expect(cleared).toMatch(new RegExp(`^${COOKIE}=;`))
        expect(cleared).toContain("Max-Age=0")
        expect(cleared).toContain("Path=/admin/queues")
        expect((yield* browse("GET", "/admin/queues", { cookie })).status).toBe(401)
        expect((yield* call("GET", "/auth/me", { token: cookie })).status).toBe(401)
      }))
  })

  describe("operations", () => {
    it.effect("dashboard requests are counted under the /admin/queues route", () =>
      Effect.gen(function*() {
        const cookie = yield* adminCookie
        yield* browse("GET", "/admin/queues/api/queues", { cookie, accept: "application/json" })
        const metrics = String((yield* call("GET", "/metrics")).body)
        expect(metrics).toMatch(/account_api_http_requests_total\{method="GET",route="\/admin\/queues",status="200"\} \d+/)
        expect(metrics).toMatch(/account_api_http_requests_total\{method="POST",route="\/admin\/queues",status="303"\} \d+/)
      }))

    it.effect("a browser leaving mid-request is logged and counted as 499, not as a server error", () =>
      Effect.gen(function*() {
        const server = yield* HttpServer.HttpServer
        const port = server.address._tag === "TcpAddress" ? server.address.port : 0
        const admin = yield* createUser({ admin: true })
        const body = new URLSearchParams({ email: admin.email, password: PASSWORD }).toString()
        const before = logLines.length
        const statusesSince = () =>
          logLines.slice(before).filter((line) => line.message === "request").map((line) => line.annotations.status)
        // Sign-in hashes for tens of milliseconds, so hanging up a few milliseconds in leaves it mid-request;
        // on a busy machine the request may not have arrived yet, so later attempts wait longer.
        for (let attempt = 0; attempt < 40 && !statusesSince().includes(499); attempt++) {
          yield* Effect.promise(() =>
            new Promise<void>((resolve) => {
              const request = httpRequest({
                host: "127.0.0.1",
                port,
                method: "POST",
                path: "/admin/queues/login",
                headers: { "content-type": "application/x-www-form-urlencoded", "content-length": String(body.length) }
              })
              request.on("error", () => resolve())
              request.end(body)
              setTimeout(() => {
                request.destroy()
                resolve()
              }, 5 + attempt * 5)
            })
          )
          yield* Effect.sleep("50 millis")
        }
        yield* Effect.sleep("300 millis")
        const lines = logLines.slice(before)
        expect(lines.filter((line) => line.logLevel === "ERROR")).toEqual([])
        const statuses = lines.filter((line) => line.message === "request").map((line) => line.annotations.status)
        expect(statuses).toContain(499)
        expect(statuses).not.toContain(500)
      }))

    it.effect("a body over 64 KiB is 413, as everywhere", () =>
      Effect.gen(function*() {
        const reply = yield* browse("POST", "/admin/queues/login", { form: { email: "a@example.com", password: "x".repeat(70 * 1024) } })
        expect(reply.status).toBe(413)
      }))
  })
})
