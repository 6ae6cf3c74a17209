import * as HttpServer from "@effect/platform/HttpServer"
import * as OpenApi from "@effect/platform/OpenApi"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { createServer, request } from "node:http"
import type { AddressInfo } from "node:net"
import pg from "pg"
import {
  AccountApiClient,
  AccountApiError,
  type AddCreditBody,
  PROBLEM_CODES,
  type ProblemCode
} from "../packages/client/src/index.js"
import { Api } from "../src/Api.js"
import { AppConfig } from "../src/Config.js"
import { problemCode } from "../src/Domain/Problem.js"
import { createOrganisation, createRepository } from "./support/policies.js"
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

        expect(yield* Effect.promise(() => client.getLimits())).toEqual({
          version: 0,
          timezone: "UTC",
          limits: [],
          updated_at: null
        })
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

  describe("credit grants (D21)", () => {
    /** An instant `days` from now, to the second, and the same instant written in another zone (+02:00). */
    const daysAhead = (days: number) => {
      const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + days * 86_400_000)
      const inParis = new Date(at.getTime() + 2 * 3_600_000).toISOString().replace(/\.000Z$/, "+02:00")
      return { utc: at.toISOString(), inParis }
    }

    it.effect("a credit takes expires_at, priority and category, answers the wallet with its grant; the wallet read has next_expiry", () =>
      Effect.gen(function*() {
        const user = yield* createUser({ admin: true })
        const client = new AccountApiClient({ baseUrl: yield* baseUrl })
        yield* Effect.promise(() => client.login(user.email, PASSWORD))
        yield* Effect.promise(() => client.setBudget({ budget_usd: "10" }))
        expect(yield* Effect.promise(() => client.getWallet())).toMatchObject({ next_expiry: null })

        const expiry = daysAhead(3)
        const trial = yield* Effect.promise(() =>
          client.addCredit({
            amount_usd: "5",
            expires_at: expiry.inParis,
            priority: 10,
            category: "promotional",
            note: "trial"
          })
        )
        expect(trial).toMatchObject({ budget_usd: "15.000000", available_usd: "15.000000", version: 2 })
        expect(trial.grant).toMatchObject({
          amount_usd: "5.000000",
          drawn_usd: "0.000000",
          held_usd: "0.000000",
          free_usd: "5.000000",
          ended_usd: "0.000000",
          priority: 10,
          category: "promotional",
          expires_at: expiry.utc,
          state: "live",
          note: "trial"
        })
        // Without the new fields, a grant as every credit was: priority 50, paid, never expiring.
        const plain = yield* Effect.promise(() => client.addCredit({ amount_usd: "2" }))
        expect(plain.budget_usd).toBe("17.000000")
        expect(plain.grant).toMatchObject({
          amount_usd: "2.000000",
          priority: 50,
          category: "paid",
          expires_at: null,
          state: "live",
          note: null
        })
        expect(yield* Effect.promise(() => client.getWallet())).toMatchObject({
          budget_usd: "17.000000",
          next_expiry: { at: expiry.utc, free_usd: "5.000000" }
        })

        // Each credit's entry names its grant; the budget's names none.
        const { entries } = yield* Effect.promise(() => client.listLedger())
        expect(entries.map(({ grants, id, kind }) => ({ id, kind, grants }))).toEqual([
          {
            id: plain.grant.entry_id,
            kind: "credit_added",
            grants: [{ grant_id: plain.grant.id, amount_usd: "2.000000" }]
          },
          {
            id: trial.grant.entry_id,
            kind: "credit_added",
            grants: [{ grant_id: trial.grant.id, amount_usd: "5.000000" }]
          },
          { id: expect.any(String), kind: "budget_set", grants: [] }
        ])

        // Each field refused at its pointer, nothing applied.
        const refused = (body: AddCreditBody) =>
          Effect.map(rejection(client.addCredit(body)), (error) => ({
            status: (error as AccountApiError).status,
            code: (error as AccountApiError).code,
            pointers: (error as AccountApiError).errors.map((field) => field.pointer)
          }))
        const at = (pointer: string) => ({ status: 422, code: "validation_failed", pointers: [pointer] })
        for (
          const [body, pointer] of [
            [{ amount_usd: "1", expires_at: new Date(Date.now() - 60_000).toISOString() }, "#/expires_at"],
            [{ amount_usd: "1", expires_at: "2030-01-01T00:00:00" }, "#/expires_at"],
            [{ amount_usd: "1", expires_at: daysAhead(5 * 366 + 2).utc }, "#/expires_at"],
            [{ amount_usd: "1", priority: 101 }, "#/priority"],
            [{ amount_usd: "1", priority: 1.5 }, "#/priority"],
            [{ amount_usd: "1", category: "gift" as "paid" }, "#/category"]
          ] satisfies ReadonlyArray<[AddCreditBody, string]>
        ) {
          expect({ body, refused: yield* refused(body) }).toEqual({ body, refused: at(pointer) })
        }
        expect(yield* Effect.promise(() => client.getWallet())).toMatchObject({ budget_usd: "17.000000", version: 3 })
      }))

    it.effect("grants are listed live in draw-down order, ended newest first; a void ends one and is replayed by its key", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const organisation = yield* createOrganisation("Grants Co")
        const admin = yield* createUser({ admin: true, organisationId: organisation })
        const member = yield* createUser({ organisationId: organisation })
        const client = new AccountApiClient({ baseUrl: url })
        yield* Effect.promise(() => client.login(admin.email, PASSWORD))
        const reader = new AccountApiClient({ baseUrl: url })
        yield* Effect.promise(() => reader.login(member.email, PASSWORD))

        const inOneDay = daysAhead(1).utc
        const inTwoDays = daysAhead(2).utc
        const credit = (body: AddCreditBody) => Effect.map(Effect.promise(() => client.addCredit(body)), (a) => a.grant)
        const never = yield* credit({ amount_usd: "4" })
        const paid = yield* credit({ amount_usd: "3", priority: 10, expires_at: inTwoDays })
        const promotional = yield* credit({
          amount_usd: "2",
          priority: 10,
          expires_at: inTwoDays,
          category: "promotional"
        })
        const soonest = yield* credit({ amount_usd: "1", priority: 10, expires_at: inOneDay })
        const drawOrder = [soonest.id, promotional.id, paid.id, never.id]

        // Any member reads them: priority, then the soonest expiry, then promotional before paid.
        const ids = (list: { readonly grants: ReadonlyArray<{ readonly id: string }> }) => list.grants.map((g) => g.id)
        expect(ids(yield* Effect.promise(() => reader.listGrants()))).toEqual(drawOrder)
        expect(ids(yield* Effect.promise(() => reader.listGrants({ state: "live" })))).toEqual(drawOrder)
        expect(ids(yield* Effect.promise(() => reader.listGrants({ state: "ended" })))).toEqual([])
        expect((yield* Effect.promise(() => client.getWallet())).next_expiry).toEqual({
          at: inOneDay,
          free_usd: "1.000000"
        })

        // A member may not void; an administrator does, once per key.
        const notAdmin = yield* rejection(reader.voidGrant(paid.id))
        expect(notAdmin).toMatchObject({ status: 403, code: "forbidden" })
        const before = yield* Effect.promise(() => client.getWallet())
        const key = randomUUID()
        const voided = yield* Effect.promise(() =>
          client.voidGrant(promotional.id, { idempotency_key: key, note: "ended early" })
        )
        expect(voided).toMatchObject({
          id: promotional.id,
          amount_usd: "2.000000",
          drawn_usd: "0.000000",
          held_usd: "0.000000",
          free_usd: "0.000000",
          ended_usd: "2.000000",
          state: "voided"
        })
        // A person's budget decision: the budget lower by what was free of it, the version up one.
        const after = yield* Effect.promise(() => client.getWallet())
        expect(after).toMatchObject({
          budget_usd: "8.000000",
          available_usd: "8.000000",
          version: before.version + 1,
          next_expiry: { at: inOneDay, free_usd: "1.000000" }
        })
        const [entry] = (yield* Effect.promise(() => client.listLedger({ limit: 1 }))).entries
        expect(entry).toMatchObject({
          kind: "credit_voided",
          amount_usd: "2.000000",
          budget_after_usd: "8.000000",
          grants: [{ grant_id: promotional.id, amount_usd: "2.000000" }]
        })
        const replayed = yield* Effect.promise(() =>
          client.voidGrant(promotional.id, { idempotency_key: key, note: "ended early" })
        )
        expect(replayed).toEqual(voided)
        expect((yield* Effect.promise(() => client.getWallet())).version).toBe(after.version)

        // Refusals: a grant that has ended, one that is not the account's, one that never was.
        const again = yield* rejection(client.voidGrant(promotional.id))
        expect(again).toBeInstanceOf(AccountApiError)
        expect(again).toMatchObject({ status: 409, code: "grant_not_live", state: "voided" })
        const stranger = yield* createUser({ admin: true })
        const other = new AccountApiClient({ baseUrl: url })
        yield* Effect.promise(() => other.login(stranger.email, PASSWORD))
        expect(yield* rejection(other.voidGrant(paid.id))).toMatchObject({ status: 404, code: "grant_not_found" })
        expect(yield* rejection(client.voidGrant(randomUUID()))).toMatchObject({
          status: 404,
          code: "grant_not_found",
          state: undefined
        })
        expect(ids(yield* Effect.promise(() => other.listGrants({ state: "all" })))).toEqual([])

        // Ended ones newest first, after the live ones in draw-down order.
        yield* Effect.promise(() => client.voidGrant(soonest.id))
        expect(yield* Effect.promise(() => client.getWallet())).toMatchObject({
          budget_usd: "7.000000",
          next_expiry: { at: inTwoDays, free_usd: "3.000000" }
        })
        const ended = yield* Effect.promise(() => reader.listGrants({ state: "ended" }))
        expect(ids(ended)).toEqual([soonest.id, promotional.id])
        expect(ended.grants.map((g) => g.state)).toEqual(["voided", "voided"])
        expect(ids(yield* Effect.promise(() => reader.listGrants({ state: "all" })))).toEqual([
          paid.id,
          never.id,
          soonest.id,
          promotional.id
        ])
        const badState = yield* rejection(reader.listGrants({ state: "gone" as "all" }))
        expect(badState).toMatchObject({ status: 422, errors: [{ pointer: "#/query/state" }] })
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

  describe("limit raise requests (D22)", () => {
    it.effect("a member asks, an administrator lists, approves one and declines another; a decided one is 409", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const orgId = yield* createOrganisation(`Raises ${randomUUID().slice(0, 8)}`)
        const adminUser = yield* createUser({ admin: true, organisationId: orgId })
        const memberUser = yield* createUser({ organisationId: orgId })
        const admin = new AccountApiClient({ baseUrl: url })
        const member = new AccountApiClient({ baseUrl: url })
        yield* Effect.promise(() => admin.login(adminUser.email, PASSWORD))
        yield* Effect.promise(() => member.login(memberUser.email, PASSWORD))
        const saved = yield* Effect.promise(() =>
          admin.replaceLimits({ limits: [{ scope: "account", period: "month", amount_usd: "50" }] })
        )
        const limitId = saved.limits[0]?.id ?? ""
        const until = new Date(Date.now() + 5 * 86_400_000).toISOString()
        const asked = yield* Effect.promise(() =>
          member.requestLimitRaise({ limit_id: limitId, amount_usd: "80", until, reason: "a migration" })
        )
        expect(asked).toMatchObject({ state: "pending", limit_id: limitId, amount_usd: "80.000000", until })
        const other = yield* Effect.promise(() =>
          member.requestLimitRaise({ limit_id: limitId, amount_usd: "90", until, reason: "another" })
        )
        expect((yield* Effect.promise(() => admin.listRaiseRequests())).requests.map((r) => r.id)).toEqual([
          other.id,
          asked.id
        ])
        const refused = yield* rejection(member.approveRaiseRequest(asked.id))
        expect(refused).toMatchObject({ status: 403, code: "forbidden" })
        const approved = yield* Effect.promise(() => admin.approveRaiseRequest(asked.id, { amount_usd: "70" }))
        expect(approved).toMatchObject({ state: "approved", approved_amount_usd: "70.000000", approved_until: until })
        const declined = yield* Effect.promise(() => admin.declineRaiseRequest(other.id, { reason: "one is enough" }))
        expect(declined).toMatchObject({ state: "declined", decline_reason: "one is enough" })
        expect((yield* Effect.promise(() => member.listRaiseRequests({ state: "decided" }))).requests.length).toBe(2)
        const again = yield* rejection(admin.approveRaiseRequest(other.id))
        expect(again).toMatchObject({ status: 409, code: "raise_request_decided", body: { state: "declined" } })
        const unknown = yield* rejection(admin.declineRaiseRequest(randomUUID()))
        expect(unknown).toMatchObject({ status: 404, code: "raise_request_not_found" })
        const limits = yield* Effect.promise(() => member.getLimits())
        expect(limits.limits[0]?.raise).toEqual({ amount_usd: "70.000000", until })
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
