import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { createServer, type Socket } from "node:net"
import { deliveryError, RETRY_DELAYS_MS, retryDelay } from "../src/Domain/Webhooks.js"
import { EventsRepo } from "../src/Events/Repo.js"
import { refusedAddress, urlProblem } from "../src/Webhooks/Rules.js"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"
import { freePort, waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, postCredit, putBudget } from "./support/Wallets.js"
import { receiver, verify } from "./support/webhookReceiver.js"

interface EndpointBody {
  readonly id: string
  readonly url: string
  readonly enabled: boolean
  readonly disabled_reason: string | null
  readonly secret?: string
}

const createEndpoint = (token: string, body: Record<string, unknown>) =>
  Effect.map(call("POST", "/developer/account/webhooks", { token, body }), (reply) => {
    expect(reply.status, JSON.stringify(reply.body)).toBe(201)
    return reply.body as EndpointBody & { readonly secret: string }
  })

const eventIds = (token: string) =>
  Effect.map(
    call("GET", "/developer/account/events?limit=500", { token }),
    (reply) => (reply.body as { events: ReadonlyArray<{ id: string; type: string }> }).events
  )

const TestLayer = WebhookWorkerLive.pipe(
  Layer.provideMerge(
    TestApp({ WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_RETRY_SCALE: "0.0005", WEBHOOK_RELAY_SWEEP_MS: "500" })
  )
)

describe("webhook rules (D17)", () => {
  plain("https only; http and internal addresses only where allowed", () => {
    expect(urlProblem("https://example.com/hook", false)).toBeUndefined()
    expect(urlProblem("http://example.com/hook", false)).toBe(
      "must be an https URL (http is allowed only where WEBHOOK_ALLOW_INSECURE=true, in development and tests)"
    )
    expect(urlProblem("http://example.com/hook", true)).toBeUndefined()
    for (
      const url of [
        "https://127.0.0.1/",
        "https://localhost/",
        "https://10.1.2.3/",
        "https://[::1]/",
        "https://169.254.169.254/"
      ]
    ) {
      expect(urlProblem(url, false), url).toMatch(
        /^must not name (localhost|a non-public address).*WEBHOOK_ALLOW_INSECURE=true/
      )
      expect(urlProblem(url, true), url).toBeUndefined()
    }
    expect(urlProblem("not a url", true)).toBe("must be an absolute URL")
    expect(urlProblem("https://user:pw@example.com/", false)).toBe("must not hold a user name or password")
  })

  plain("internal addresses, as resolved at each delivery", () => {
    for (
      const address of [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.1.1",
        "0.0.0.0",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1"
      ]
    ) {
      expect(refusedAddress(address), address).toBeDefined()
    }
    for (const address of ["93.184.216.34", "172.32.0.1", "2606:2800:220:1:248:1893:25c8:1946", "::ffff:8.8.8.8"]) {
      expect(refusedAddress(address), address).toBeUndefined()
    }
  })

  plain("the retry schedule: 5 s … 10 h with jitter, scaled, Retry-After up to an hour, then none", () => {
    const at = (random: number) => (n: number, retryAfterMs?: number) =>
      retryDelay(n, { scale: 1, retryAfterMs, random: () => random })
    expect(RETRY_DELAYS_MS.map((_, n) => at(0.5)(n + 1))).toEqual([
      5_000,
      300_000,
      1_800_000,
      7_200_000,
      18_000_000,
      36_000_000,
      36_000_000
    ])
    expect(at(0)(1)).toBe(4_500)
    expect(at(1)(1)).toBe(5_500)
    expect(at(0.5)(8)).toBeUndefined()
    expect(at(0.5)(1, 120_000)).toBe(120_000)
    expect(at(0.5)(1, 5 * 3_600_000)).toBe(3_600_000)
    expect(retryDelay(2, { scale: 0.001, random: () => 0.5 })).toBe(300)
  })
})

layer(TestLayer, { excludeTestServices: true, timeout: "60 seconds" })("webhooks (D17)", (it) => {
  describe("endpoint management", () => {
    it.effect("is for administrators only: 403 before the path, the query or the body is looked at", () =>
      Effect.gen(function*() {
        const member = yield* signedInUser()
        for (
          const [method, path] of [
            ["POST", "/developer/account/webhooks"],
            ["GET", "/developer/account/webhooks"],
            ["GET", "/developer/account/webhooks/nope"],
            ["PATCH", "/developer/account/webhooks/nope"],
            ["DELETE", "/developer/account/webhooks/nope"],
            ["POST", "/developer/account/webhooks/nope/rotate-secret"],
            ["POST", "/developer/account/events/nope/redeliver"],
            // A query no call would accept is still 403 first: nothing is decoded for a member.
            ["GET", "/developer/account/webhooks/nope/deliveries?limit=0"]
          ] as const
        ) {
          const reply = yield* call(method, path, { token: member.token, rawBody: "{not json" })
          expect(reply.status, `${method} ${path}`).toBe(403)
        }
      }))

    it.effect("creates with a secret shown once, lists, changes, rotates and deletes; 404 and 422 as D1", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const created = yield* createEndpoint(admin.token, {
          url: "https://example.com/hook",
          types: ["wallet.credit_added"],
          description: "books"
        })
        expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
        expect(Buffer.from(created.secret.slice(6), "base64")).toHaveLength(32)
        const listed = yield* call("GET", "/developer/account/webhooks", { token: admin.token })
        expect(listed.status).toBe(200)
        expect(JSON.stringify(listed.body)).not.toContain(created.secret)
        expect((listed.body as { endpoints: Array<EndpointBody> }).endpoints.map((e) => e.id)).toEqual([created.id])
        const path = `/developer/account/webhooks/${created.id}`
        const patched = yield* call("PATCH", path, { token: admin.token, body: { enabled: false, types: null } })
        expect(patched.status).toBe(200)
        expect(patched.body).toMatchObject({ enabled: false, types: null })
        const rotated = yield* call("POST", `${path}/rotate-secret`, { token: admin.token })
        expect(rotated.status).toBe(200)
        expect((rotated.body as { secret: string }).secret).toMatch(/^whsec_/)
        expect((rotated.body as { secret: string }).secret).not.toBe(created.secret)

        const invalid = yield* call("POST", "/developer/account/webhooks", {
          token: admin.token,
          body: { url: "ftp://example.com", types: ["no.such"], extra: 1 }
        })
        expect(invalid.status).toBe(422)
        expect((invalid.body as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer).sort())
          .toEqual(expect.arrayContaining(["#/extra", "#/types/0"]))
        const badUrl = yield* call("POST", "/developer/account/webhooks", {
          token: admin.token,
          body: { url: "ftp://example.com" }
        })
        expect(badUrl.status).toBe(422)
        expect(badUrl.body).toMatchObject({ errors: [{ pointer: "#/url" }] })

        // Another account's endpoint, and ids that are no endpoint, are 404 alike.
        const other = yield* signedInUser({ admin: true })
        for (const id of [created.id, "not-a-uuid", "018f0000-0000-7000-8000-000000000000"]) {
          const reply = yield* call("GET", `/developer/account/webhooks/${id}`, { token: other.token })
          expect(reply.status).toBe(404)
          expect(reply.body).toMatchObject({ code: "webhook_not_found" })
        }
        expect((yield* call("DELETE", path, { token: admin.token })).status).toBe(204)
        expect((yield* call("GET", path, { token: admin.token })).status).toBe(404)
      }))

    it.effect("holds an account to ten endpoints", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const made = yield* Effect.all(
          Array.from({ length: 12 }, (_, n) =>
            call("POST", "/developer/account/webhooks", {
              token: admin.token,
              body: { url: `https://example.com/${n}` }
            })),
          { concurrency: "unbounded" }
        )
        expect(made.filter((reply) => reply.status === 201)).toHaveLength(10)
        const refused = made.filter((reply) => reply.status !== 201)
        expect(refused.map((reply) => reply.status)).toEqual([409, 409])
        expect(refused[0]?.body).toMatchObject({ code: "webhook_limit_reached", limit: 10 })
      }))
  })

  describe("delivery", () => {
    it.scoped("every event to every matching endpoint, verified by the official package, none to another account", () =>
      Effect.gen(function*() {
        const server = yield* receiver
        const a = yield* signedInUser({ admin: true })
        const b = yield* signedInUser({ admin: true })
        const all = yield* createEndpoint(a.token, { url: server.url("/a-all") })
        const credits = yield* createEndpoint(a.token, {
          url: server.url("/a-credits"),
          types: ["wallet.credit_added"]
        })
        const other = yield* createEndpoint(b.token, { url: server.url("/b-all") })
        for (const user of [a, b]) {
          expect((yield* putBudget(user.token, { budget_usd: "100", idempotency_key: newKey() })).status).toBe(200)
          expect((yield* postCredit(user.token, { amount_usd: "5", idempotency_key: newKey() })).status).toBe(200)
          expect((yield* postCredit(user.token, { amount_usd: "6", idempotency_key: newKey() })).status).toBe(200)
        }
        const aEvents = yield* eventIds(a.token)
        const bEvents = yield* eventIds(b.token)
        const expected = [
          ...aEvents.map((e) => `/a-all ${e.id}`),
          ...aEvents.filter((e) => e.type === "wallet.credit_added").map((e) => `/a-credits ${e.id}`),
          ...bEvents.map((e) => `/b-all ${e.id}`)
        ].sort()
        expect(expected.length).toBe(3 + 2 + 3)
        const got = () => [...new Set(server.received.map((r) => `${r.path} ${r.headers["webhook-id"]}`))].sort()
        yield* waitFor(
          "every event reached its endpoints",
          Effect.sync(() => got().length >= expected.length ? Option.some(true) : Option.none()),
          { limit: "20 seconds" }
        )
        expect(got()).toEqual(expected)
        const secretOf = new Map([["/a-all", all.secret], ["/a-credits", credits.secret], ["/b-all", other.secret]])
        for (const delivery of server.received) {
          const verified = verify(secretOf.get(delivery.path) ?? "", delivery)
          expect(verified, delivery.path).toMatchObject({ type: expect.any(String) })
          const id = delivery.headers["webhook-id"]
          const event = [...aEvents, ...bEvents].find((e) => e.id === id)
          expect(typeof verified === "object" ? verified.type : verified).toBe(event?.type)
        }
        // A secret of another endpoint does not verify.
        const first = server.received.find((r) => r.path === "/b-all")
        expect(typeof verify(all.secret, first ?? { path: "", headers: {}, body: "" })).toBe("string")
      }))

    it.scoped(
      "relays in rounds: more accounts than a round takes, a backlog longer than a round's, each event once",
      () =>
        Effect.gen(function*() {
          const server = yield* receiver
          // 105 accounts: a round takes 100. The first gets 1,100 events at once: a round takes 500 of one account.
          const users = yield* Effect.all(
            Array.from({ length: 105 }, () => signedInUser({ admin: true })),
            { concurrency: 8 }
          )
          yield* Effect.forEach(users, (user, n) => createEndpoint(user.token, { url: server.url(`/round-${n}`) }), {
            concurrency: 8
          })
          const events = yield* Effect.provide(EventsRepo, EventsRepo.Default)
          // One statement: every account's events committed at once, so the relay meets them together.
          const appended = yield* events.append(users.flatMap((user, n) =>
            Array.from({ length: n === 0 ? 1_100 : 1 }, () => ({
              account_kind: "user" as const,
              account_id: user.id,
              type: "wallet.credit_added",
              data: "{}"
            }))
          ))
          const pathOf = new Map(users.map((user, n) => [user.id, `/round-${n}`]))
          const expected = appended.map((event) =>
            `${pathOf.get(event.account_id)} ${event.id}`
          ).sort()
          expect(expected).toHaveLength(1_100 + 104)
          yield* waitFor(
            "every event reached its account's endpoint",
            Effect.sync(() => server.received.length >= expected.length ? Option.some(true) : Option.none()),
            { limit: "60 seconds" }
          )
          // Exactly once each, nothing crossed to another account's endpoint.
          expect(server.received.map((r) => `${r.path} ${r.headers["webhook-id"]}`).sort()).toEqual(expected)
        }),
      { timeout: 120_000 }
    )

    it.scoped("retries a failing receiver until it recovers, and lists each attempt", () =>
      Effect.gen(function*() {
        const server = yield* receiver
        server.script.set("/flaky", [500, 503, 200])
        const admin = yield* signedInUser({ admin: true })
        const endpoint = yield* createEndpoint(admin.token, { url: server.url("/flaky"), types: ["wallet.budget_set"] })
        expect((yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        const path = `/developer/account/webhooks/${endpoint.id}/deliveries`
        const attempts = yield* waitFor(
          "the third attempt is delivered",
          Effect.map(call("GET", path, { token: admin.token }), (reply) => {
            const list = (reply.body as { deliveries: Array<Record<string, unknown>> }).deliveries
            return list.some((d) => d.outcome === "delivered") ? Option.some(list) : Option.none()
          }),
          { limit: "20 seconds" }
        )
        expect(attempts.map((d) => [d.attempt, d.outcome, d.status_code])).toEqual([
          [3, "delivered", 200],
          [2, "retrying", 503],
          [1, "retrying", 500]
        ])
        expect(attempts[1]?.next_attempt_at).toEqual(expect.any(String))
        const ids = new Set(server.received.map((r) => r.headers["webhook-id"]))
        expect(ids.size).toBe(1)
        for (const delivery of server.received) expect(verify(endpoint.secret, delivery)).toMatchObject({})
      }))

    it.scoped("honours Retry-After on 503 (scaled, as the schedule is) and follows no redirect", () =>
      Effect.gen(function*() {
        const server = yield* receiver
        server.script.set("/busy", [503, 204])
        server.answerHeaders.set("/busy", { "retry-after": "600" })
        server.script.set("/moved", [302, 204])
        server.answerHeaders.set("/moved", { location: server.url("/elsewhere") })
        const admin = yield* signedInUser({ admin: true })
        const busy = yield* createEndpoint(admin.token, { url: server.url("/busy"), types: ["wallet.budget_set"] })
        const moved = yield* createEndpoint(admin.token, { url: server.url("/moved"), types: ["wallet.budget_set"] })
        expect((yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        const attemptsOf = (id: string) =>
          waitFor(
            "the second attempt is delivered",
            Effect.map(call("GET", `/developer/account/webhooks/${id}/deliveries`, { token: admin.token }), (reply) => {
              const list = (reply.body as { deliveries: Array<Record<string, unknown>> }).deliveries
              return list.some((d) => d.outcome === "delivered") ? Option.some(list) : Option.none()
            }),
            { limit: "20 seconds" }
          )
        const [busyDone, busyFirst] = yield* attemptsOf(busy.id)
        // 600 s asked, times the test's scale (0.0005): 300 ms, where the schedule's first wait is 2.5 ms.
        const waited = Date.parse(String(busyFirst?.next_attempt_at)) - Date.parse(String(busyFirst?.attempted_at))
        expect(waited).toBeGreaterThanOrEqual(250)
        expect(busyDone).toMatchObject({ attempt: 2, outcome: "delivered" })
        const [movedDone, movedFirst] = yield* attemptsOf(moved.id)
        expect(movedFirst).toMatchObject({ attempt: 1, outcome: "retrying", status_code: 302 })
        expect(String(movedFirst?.error)).toContain("redirects are not followed")
        expect(movedDone).toMatchObject({ attempt: 2, outcome: "delivered" })
        expect(server.received.filter((r) => r.path === "/elsewhere")).toEqual([])
      }))

    it.effect("delivery attempts older than the 30 days events are kept are pruned by the relay's sweep", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const admin = yield* signedInUser({ admin: true })
        const endpoint = yield* createEndpoint(admin.token, { url: "https://example.com/old" })
        const event = newKey()
        for (const days of [31, 29]) {
          yield* sql`INSERT INTO webhook_deliveries
                       (endpoint_id, event_id, event_type, attempt, outcome, status_code, duration_ms, attempted_at)
                     VALUES (${endpoint.id}, ${event}, 'wallet.budget_set', 1, 'delivered', 204, 5,
                             now() - make_interval(days => ${days}))`
        }
        const left = yield* waitFor(
          "the old attempt is pruned",
          Effect.map(call("GET", `/developer/account/webhooks/${endpoint.id}/deliveries`, { token: admin.token }), (
            reply
          ) => {
            const list = (reply.body as { deliveries: Array<{ attempted_at: string }> }).deliveries
            return list.length === 1 ? Option.some(list) : Option.none()
          }),
          { limit: "20 seconds" }
        )
        expect(Date.parse(left[0]?.attempted_at ?? "")).toBeGreaterThan(Date.now() - 30 * 86_400_000)
      }).pipe(Effect.orDie))

    it.scoped("a failed attempt shows the class of failure, never the socket's error", () =>
      Effect.gen(function*() {
        const server = yield* receiver
        const tcpServer = (onConnection: (socket: Socket) => void) =>
          Effect.acquireRelease(
            Effect.async<{ readonly port: number; readonly close: () => void }>((resume) => {
              const sockets = new Set<Socket>()
              const tcp = createServer((socket) => {
                sockets.add(socket)
                onConnection(socket)
              })
              tcp.listen(0, "127.0.0.1", () => {
                const address = tcp.address()
                const port = typeof address === "object" && address !== null ? address.port : 0
                resume(Effect.succeed({
                  port,
                  close: () => {
                    for (const socket of sockets) socket.destroy()
                    tcp.close()
                  }
                }))
              })
            }),
            ({ close }) => Effect.sync(close)
          )
        // Takes the connection and drops it at once: reset before any answer.
        const dropper = yield* tcpServer((socket) => socket.destroy())
        // Takes the connection and the request, and never answers.
        const silent = yield* tcpServer((socket) => socket.resume())
        const closedPort = yield* freePort
        const admin = yield* signedInUser({ admin: true })
        const cases = [
          [`https://127.0.0.1:${closedPort}/`, "connection_failed"],
          [`http://127.0.0.1:${dropper.port}/`, "connection_failed"],
          // TLS spoken to a plain HTTP receiver.
          [server.url("/plain").replace(/^http:/, "https:"), "tls_failed"],
          [server.url("/broken"), "http_status"],
          // `.invalid` never resolves (RFC 6761).
          ["https://hook.example.invalid/", "dns_failed"],
          [`http://127.0.0.1:${silent.port}/`, "timeout"]
        ] as const
        server.script.set("/broken", [500])
        const made = yield* Effect.forEach(cases, ([url]) =>
          createEndpoint(admin.token, { url, types: ["wallet.budget_set"] }))
        expect((yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        for (const [n, [url, failure]] of cases.entries()) {
          const [first] = yield* waitFor(
            `the first attempt to ${url} is recorded`,
            Effect.map(
              call("GET", `/developer/account/webhooks/${made[n]?.id}/deliveries`, { token: admin.token }),
              (reply) => {
                const list = (reply.body as { deliveries: Array<Record<string, unknown>> }).deliveries
                return list.length > 0 ? Option.some(list) : Option.none()
              }
            ),
            // The silent receiver's attempt takes the 10 s a delivery waits for an answer.
            { limit: "30 seconds" }
          )
          expect(first, url).toMatchObject({ outcome: "retrying", error: deliveryError(failure) })
        }
      }), { timeout: 60_000 })

    it.scoped("a 410 disables the endpoint at once and writes webhook_endpoint.disabled", () =>
      Effect.gen(function*() {
        const server = yield* receiver
        server.script.set("/gone", [410])
        const admin = yield* signedInUser({ admin: true })
        const endpoint = yield* createEndpoint(admin.token, { url: server.url("/gone"), types: ["wallet.budget_set"] })
        expect((yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        const disabled = yield* waitFor(
          "the endpoint is disabled",
          Effect.map(call("GET", `/developer/account/webhooks/${endpoint.id}`, { token: admin.token }), (reply) => {
            const body = reply.body as EndpointBody
            return body.enabled ? Option.none() : Option.some(body)
          }),
          { limit: "20 seconds" }
        )
        expect(disabled.disabled_reason).toBe("gone")
        const events = yield* call("GET", "/developer/account/events?type=webhook_endpoint.disabled", {
          token: admin.token
        })
        expect(events.body).toMatchObject({
          events: [{ type: "webhook_endpoint.disabled", data: { endpoint: { id: endpoint.id }, reason: "gone" } }]
        })
        expect(server.received).toHaveLength(1)
      }))

    it.scoped("during a rotation both the old and the new secret verify; redeliver sends the same webhook-id again", () =>
      Effect.gen(function*() {
        const server = yield* receiver
        const admin = yield* signedInUser({ admin: true })
        const endpoint = yield* createEndpoint(admin.token, { url: server.url("/rot"), types: ["wallet.credit_added"] })
        const rotated = yield* call("POST", `/developer/account/webhooks/${endpoint.id}/rotate-secret`, {
          token: admin.token
        })
        const newSecret = (rotated.body as { secret: string }).secret
        expect((yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })).status).toBe(200)
        yield* waitFor(
          "the credit is delivered",
          Effect.sync(() => server.received.length >= 1 ? Option.some(true) : Option.none()),
          { limit: "20 seconds" }
        )
        const [delivery] = server.received
        if (delivery === undefined) return expect.unreachable()
        expect(delivery.headers["webhook-signature"]?.split(" ")).toHaveLength(2)
        expect(verify(endpoint.secret, delivery)).toMatchObject({ type: "wallet.credit_added" })
        expect(verify(newSecret, delivery)).toMatchObject({ type: "wallet.credit_added" })

        const id = delivery.headers["webhook-id"] ?? ""
        const again = yield* call("POST", `/developer/account/events/${id}/redeliver`, { token: admin.token })
        expect(again.status).toBe(202)
        expect(again.body).toEqual({ event_id: id, endpoints: 1 })
        yield* waitFor(
          "the redelivery arrives",
          Effect.sync(() => server.received.length >= 2 ? Option.some(true) : Option.none()),
          { limit: "20 seconds" }
        )
        expect(server.received.map((r) => r.headers["webhook-id"])).toEqual([id, id])
        const missing = yield* call("POST", `/developer/account/events/${newKey()}/redeliver`, { token: admin.token })
        expect(missing.status).toBe(404)
      }))
  })
})
