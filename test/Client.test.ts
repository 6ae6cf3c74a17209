import * as HttpServer from "@effect/platform/HttpServer"
import * as OpenApi from "@effect/platform/OpenApi"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { createServer, request } from "node:http"
import type { AddressInfo } from "node:net"
import pg from "pg"
import { AccountApiClient, AccountApiError, PROBLEM_CODES, type ProblemCode } from "../packages/client/src/index.js"
import { Api } from "../src/Api.js"
import { AppConfig } from "../src/Config.js"
import { problemCode } from "../src/Domain/Problem.js"
import { createRepository } from "./support/policies.js"
import { rejection } from "./support/rejection.js"
import { createUser, PASSWORD, TestApp } from "./support/TestApp.js"

/**
 * The promise client against the service, as an integrator's code drives it: every operation,
 * and its retry rules seen from the wire (a proxy between them records each exchange).
 */

const baseUrl = Effect.map(
  HttpServer.HttpServer,
  (server) => `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
)

interface Exchange {
  readonly method: string
  readonly path: string
  readonly body: string
  readonly status: number
  readonly replayed: string | undefined
  /** The proxy hung up instead of passing the answer on. */
  readonly dropped: boolean
}

/**
 * A proxy to `target` that forwards every request and passes its answer on, except that it
 * hangs up on the first `drop` answers to writes (the service did answer: the answer is lost), and
 * holds the first `hang` writes without sending them on or answering (a server that never answers).
 */
const proxy = (target: string, drop: number, hang = 0) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly exchanges: Array<Exchange>; close: () => void }>((resume) => {
      const upstream = new URL(target)
      const exchanges: Array<Exchange> = []
      let dropped = 0
      let held = 0
      const server = createServer((incoming, outgoing) => {
        const chunks: Array<Buffer> = []
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
        incoming.on("end", () => {
          if (incoming.method !== "GET" && held < hang) {
            held += 1
            return
          }
          const body = Buffer.concat(chunks)
          const forwarded = request({
            host: upstream.hostname,
            port: upstream.port,
            method: incoming.method,
            path: incoming.url,
            headers: { ...incoming.headers, host: upstream.host }
          }, (answer) => {
            const parts: Array<Buffer> = []
            answer.on("data", (chunk: Buffer) => parts.push(chunk))
            answer.on("end", () => {
              const hangUp = incoming.method !== "GET" && dropped < drop
              if (hangUp) dropped += 1
              const replayed = answer.headers["idempotent-replayed"]
              exchanges.push({
                method: incoming.method ?? "",
                path: incoming.url ?? "",
                body: body.toString("utf8"),
                status: answer.statusCode ?? 0,
                replayed: typeof replayed === "string" ? replayed : undefined,
                dropped: hangUp
              })
              if (hangUp) return incoming.socket.destroy()
              outgoing.writeHead(answer.statusCode ?? 502, answer.headers)
              outgoing.end(Buffer.concat(parts))
            })
          })
          forwarded.end(body)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({
          url: `http://127.0.0.1:${port}`,
          exchanges,
          close: () => {
            server.closeAllConnections()
            server.close()
          }
        }))
      })
    }),
    (proxy) => Effect.sync(() => proxy.close())
  )

/** Every item of an async iterable, as `for await` reads them. */
const collect = <A>(iterable: AsyncIterable<A>) =>
  Effect.promise(async () => {
    const items: Array<A> = []
    for await (const item of iterable) items.push(item)
    return items
  })

describe("the client's errors", () => {
  it("know every problem code the contract's document lists, and only those", () => {
    const schemas = Object.keys(OpenApi.fromApi(Api).components.schemas)
    const documented = schemas.filter((name) => name.endsWith("Problem")).map((name) =>
      problemCode(name.slice(0, -"Problem".length))
    )
    expect(documented.length).toBeGreaterThan(10)
    expect([...PROBLEM_CODES].sort()).toEqual(documented.sort())
    const code: ProblemCode = "idempotency_in_progress"
    expect(PROBLEM_CODES).toContain(code)
  })
})

layer(TestApp(), { excludeTestServices: true, timeout: "60 seconds" })("the promise client", (it) => {
  describe("every operation of the contract", () => {
    it.effect("signs in, reads and writes the policy, the wallet, the ledger, the sessions and the limits, and signs out", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const user = yield* createUser({ admin: true })
        const client = new AccountApiClient({ baseUrl: url })
        const signedIn = yield* Effect.promise(() => client.login(user.email, PASSWORD))
        expect(client.token).toBe(signedIn.access_token)
        const me = yield* Effect.promise(() => client.me())
        expect(me.user.email).toBe(user.email)

        expect(yield* Effect.promise(() => client.healthz())).toEqual({ status: "ok" })
        expect(yield* Effect.promise(() => client.readyz())).toMatchObject({ status: "ready" })
        expect(yield* Effect.promise(() => client.metrics())).toContain("# TYPE")

        const capabilities = yield* Effect.promise(() => client.getCapabilities())
        expect(Object.keys(capabilities.policy).length).toBe(12)
        const policy = yield* Effect.promise(() => client.getAccountPolicy())
        expect(policy.version).toBe(0)
        const saved = yield* Effect.promise(() => client.replaceAccountPolicy({ policy: policy.policy }))
        expect(saved.version).toBe(1)
        const stale = yield* rejection(client.replaceAccountPolicy({ policy: policy.policy, expected_version: 0 }))
        expect(stale).toBeInstanceOf(AccountApiError)
        expect(stale).toMatchObject({ status: 409, code: "version_conflict", current_version: 1 })

        const repository = yield* createRepository(me.account.id)
        const inherited = yield* Effect.promise(() => client.getRepositoryPolicy(repository))
        expect(inherited.override).toBeNull()
        const overridden = yield* Effect.promise(() => client.replaceRepositoryPolicy(repository, { policy: {} }))
        expect(overridden.repository_id).toBe(repository)

        expect(yield* Effect.promise(() => client.getWallet())).toMatchObject({ budget_usd: "0.000000" })
        const budget = yield* Effect.promise(() => client.setBudget({ budget_usd: "100", note: "first" }))
        expect(budget.budget_usd).toBe("100.000000")
        const credited = yield* Effect.promise(() => client.addCredit({ amount_usd: "5" }))
        expect(credited.budget_usd).toBe("105.000000")
        for (let i = 0, version = credited.version; i < 3; i++) {
          const wallet = yield* Effect.promise(() =>
            client.setBudget({ budget_usd: String(110 + i), expected_version: version })
          )
          version = wallet.version
        }

        // Five entries, two to a page: three pages, newest first, each entry once.
        const pages = (yield* collect(client.ledgerPages({ limit: 2 }))).map((page) =>
          page.entries.map((entry) => entry.id)
        )
        expect(pages.map((page) => page.length)).toEqual([2, 2, 1])
        expect(new Set(pages.flat()).size).toBe(5)
        const first = yield* Effect.promise(() => client.listLedger({ limit: 2 }))
        expect(first.entries.map((entry) => entry.id)).toEqual(pages[0])

        const csv = (yield* collect(client.exportLedger())).join("")
        expect(csv.trim().split("\n").length).toBe(6)
        expect(csv.startsWith("id,sequence,created_at,kind")).toBe(true)

        // The balances as of the newest entry's time are its balances; before the first, zeros.
        const newest = first.entries[0]
        const then = yield* Effect.promise(() => client.walletAsOf(newest?.created_at ?? ""))
        expect(then).toEqual({
          as_of: newest?.created_at,
          budget_usd: "112.000000",
          reserved_usd: "0.000000",
          spent_usd: "0.000000",
          available_usd: "112.000000",
          entry_id: newest?.id,
          sequence: 5
        })
        const before = yield* Effect.promise(() => client.walletAsOf("2001-01-01T00:00:00+01:00"))
        expect(before).toMatchObject({ as_of: "2000-12-31T23:00:00.000Z", entry_id: null, sequence: 0 })
        const future = yield* rejection(client.walletAsOf("9999-01-01T00:00:00Z"))
        expect(future).toMatchObject({ status: 422, code: "validation_failed", errors: [{ pointer: "#/query/time" }] })

        const sessions = (yield* collect(client.sessionPages({ state: "all" }))).flatMap((page) => page.sessions)
        expect(sessions).toEqual([])
        expect((yield* Effect.promise(() => client.listSessions())).next_before).toBeNull()
        const unknown = yield* rejection(client.getSession("no-such-session"))
        expect(unknown).toMatchObject({ status: 404, code: "session_not_found" })

        expect(yield* Effect.promise(() => client.getLimits())).toEqual({ version: 0, limits: [], updated_at: null })
        const limits = yield* Effect.promise(() =>
          client.replaceLimits({
            limits: [{ scope: "repository", scope_id: repository, period: "week", amount_usd: "40" }]
          })
        )
        expect(limits).toMatchObject({ version: 1, limits: [{ scope_id: repository, used_usd: "0.000000" }] })
        const staleLimits = yield* rejection(client.replaceLimits({ limits: [], expected_version: 0 }))
        expect(staleLimits).toMatchObject({ status: 409, code: "version_conflict", current_version: 1 })
        const spend = yield* Effect.promise(() => client.getSpend({ group_by: "month", from: "2026-01-01" }))
        expect(spend).toMatchObject({ from: "2026-01-01T00:00:00.000Z", groups: [], total: { sessions: 0 } })
        const badWindow = yield* rejection(client.getSpend({ group_by: "day", from: "2026-02-01", to: "2026-01-01" }))
        expect(badWindow).toMatchObject({ status: 422, errors: [{ pointer: "#/query/to" }] })

        yield* Effect.promise(() => client.logout())
        expect(client.token).toBeUndefined()
        const signedOut = yield* rejection(new AccountApiClient({ baseUrl: url, token: signedIn.access_token }).me())
        expect(signedOut).toMatchObject({ status: 401, code: "unauthenticated" })
      }))
  })

  describe("webhook endpoints (D17)", () => {
    it.effect("registers, lists, reads, changes, rotates, lists deliveries, redelivers and deletes", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const user = yield* createUser({ admin: true })
        const client = new AccountApiClient({ baseUrl: url })
        yield* Effect.promise(() => client.login(user.email, PASSWORD))

        const made = yield* Effect.promise(() =>
          client.createWebhook({ url: "https://hooks.example.com/account", types: ["wallet.credit_added"] })
        )
        expect(made.secret).toMatch(/^whsec_/)
        const listed = yield* Effect.promise(() => client.listWebhooks())
        expect(listed.endpoints.map((endpoint) => endpoint.id)).toEqual([made.id])
        expect(listed.endpoints[0]).not.toHaveProperty("secret")
        expect(yield* Effect.promise(() => client.getWebhook(made.id))).toMatchObject({ enabled: true })

        const changed = yield* Effect.promise(() =>
          client.updateWebhook(made.id, { description: "books", enabled: false })
        )
        expect(changed).toMatchObject({ description: "books", enabled: false })
        const rotated = yield* Effect.promise(() => client.rotateWebhookSecret(made.id))
        expect(rotated.secret).toMatch(/^whsec_/)
        expect(rotated.secret).not.toBe(made.secret)
        expect(yield* Effect.promise(() => client.listWebhookDeliveries(made.id, { limit: 5 }))).toEqual({
          deliveries: []
        })

        yield* Effect.promise(() => client.updateWebhook(made.id, { enabled: true }))
        yield* Effect.promise(() => client.addCredit({ amount_usd: "5" }))
        const event = (yield* Effect.promise(() => client.listEvents({ type: "wallet.credit_added" }))).events[0]
        expect(event).toBeDefined()
        const again = yield* Effect.promise(() => client.redeliverEvent(event?.id ?? ""))
        expect(again).toEqual({ event_id: event?.id, endpoints: 1 })

        yield* Effect.promise(() => client.deleteWebhook(made.id))
        const gone = yield* rejection(client.getWebhook(made.id))
        expect(gone).toMatchObject({ status: 404, code: "webhook_not_found" })
      }))
  })

  describe("retries (D6)", () => {
    it.scoped("a write whose answer is lost is sent again with its key and replayed, not applied twice", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const client = new AccountApiClient({ baseUrl: yield* baseUrl })
        yield* Effect.promise(() => client.login(user.email, PASSWORD))
        const lost = yield* proxy(yield* baseUrl, 1)
        const writer = new AccountApiClient({
          baseUrl: lost.url,
          token: client.token ?? "",
          retry: { baseDelayMs: 10 }
        })
        const wallet = yield* Effect.promise(() => writer.setBudget({ budget_usd: "40" }))
        expect(wallet.budget_usd).toBe("40.000000")
        const writes = lost.exchanges.filter((exchange) => exchange.method === "PUT")
        expect(writes.map(({ dropped, replayed, status }) => ({ status, dropped, replayed }))).toEqual([
          { status: 200, dropped: true, replayed: undefined },
          { status: 200, dropped: false, replayed: "true" }
        ])
        const keys = writes.map((write) => (JSON.parse(write.body) as { idempotency_key: string }).idempotency_key)
        expect(new Set(keys).size).toBe(1)
        const ledger = yield* Effect.promise(() => writer.listLedger())
        expect(ledger.entries.filter((entry) => entry.kind === "budget_set")).toHaveLength(1)
      }))

    it.scoped("an attempt left unanswered is given up after timeoutMs and sent again", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const client = new AccountApiClient({ baseUrl: yield* baseUrl })
        yield* Effect.promise(() => client.login(user.email, PASSWORD))
        const silent = yield* proxy(yield* baseUrl, 0, 1)
        // The bound must outlast the attempt that is answered, even on a loaded machine (a PUT of
        // a few ms takes a second there): a shorter one gives that attempt up too, and it is
        // answered twice or not at all.
        const writer = new AccountApiClient({ baseUrl: silent.url, token: client.token ?? "", timeoutMs: 5_000 })
        const wallet = yield* Effect.promise(() => writer.setBudget({ budget_usd: "7" }))
        expect(wallet.budget_usd).toBe("7.000000")
        // The held attempt never reached the service; the one sent again did, once.
        expect(silent.exchanges.filter((exchange) => exchange.method === "PUT").map(({ status }) => status)).toEqual([
          200
        ])
      }))

    it.scoped("a 409 idempotency_in_progress is sent again after Retry-After and then succeeds", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const user = yield* createUser()
        const via = yield* proxy(yield* baseUrl, 0)
        const client = new AccountApiClient({ baseUrl: via.url })
        yield* Effect.promise(() => client.login(user.email, PASSWORD))
        const key = "held-by-another-request"
        // Another request holds the key: its transaction has the key's lock, for a moment.
        const other = new pg.Client({ connectionString: Redacted.value(config.databaseUrl) })
        yield* Effect.promise(async () => {
          await other.connect()
          await other.query("BEGIN")
          await other.query(
            "SELECT pg_advisory_xact_lock(hashtextextended('wallet_idempotency:' || 'user' || ':' || $1 || ':' || $2, 0))",
            [user.id, key]
          )
        })
        const released = Effect.promise(async () => {
          await other.query("COMMIT")
          await other.end()
        })
        const write = client.setBudget({ budget_usd: "12", idempotency_key: key })
        // The first answer is the 409; the lock goes with the other transaction's end.
        yield* Effect.promise(async () => {
          while (!via.exchanges.some((exchange) => exchange.method === "PUT")) {
            await new Promise((r) => setTimeout(r, 20))
          }
        })
        yield* released
        const wallet = yield* Effect.promise(() => write)
        expect(wallet.budget_usd).toBe("12.000000")
        const writes = via.exchanges.filter((exchange) => exchange.method === "PUT").map((exchange) => exchange.status)
        expect(writes[0]).toBe(409)
        expect(writes.at(-1)).toBe(200)
      }))

    it.scoped("a 422 is thrown at once, typed, with its code and field errors", () =>
      Effect.gen(function*() {
        const user = yield* createUser()
        const via = yield* proxy(yield* baseUrl, 0)
        const client = new AccountApiClient({ baseUrl: via.url })
        yield* Effect.promise(() => client.login(user.email, PASSWORD))
        const error = yield* rejection(client.setBudget({ budget_usd: "ten dollars" }))
        expect(error).toBeInstanceOf(AccountApiError)
        expect(error).toMatchObject({ status: 422, code: "validation_failed" })
        expect((error as AccountApiError).errors.map((field) => field.pointer)).toEqual(["#/budget_usd"])
        expect(via.exchanges.filter((exchange) => exchange.method === "PUT")).toHaveLength(1)
      }))
  })
})
