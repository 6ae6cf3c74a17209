import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import { Account } from "../src/Domain/Account.js"
import { catalog, eventTypes } from "../src/Domain/Events.js"
import * as Money from "../src/Domain/Money.js"
import { Events } from "../src/Events.js"
import { Wallets } from "../src/Wallets.js"
import { WalletLedger } from "../src/Wallets/Ledger.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { getLedger, newKey, pageOf, postCredit, putBudget, walletOf } from "./support/Wallets.js"

const problem = (status: number, code: string) => ({ type: "about:blank", status, code })

interface EventBody {
  readonly id: string
  readonly type: string
  readonly created_at: string
  readonly data: Record<string, unknown>
}
interface EventPageBody {
  readonly events: ReadonlyArray<EventBody>
  readonly next_after: string | null
}

const getEvents = (token: string, query = "") =>
  call("GET", `/developer/account/events${query === "" ? "" : `?${query}`}`, { token })
const eventsOf = (token: string, query = "") =>
  Effect.map(getEvents(token, query), (reply) => {
    expect(reply.status, JSON.stringify(reply.body)).toBe(200)
    return reply.body as EventPageBody
  })
const typesOf = (token: string) => Effect.map(eventsOf(token, "limit=500"), (page) => page.events.map((e) => e.type))

const putAlerts = (token: string, body: Record<string, unknown>) =>
  call("PUT", "/developer/account/alerts", { token, body })

/** Holds some of the budget as a settlement reserve would (settlement writes no events yet). */
const reserve = (userId: string, amount: string) =>
  Effect.flatMap(
    WalletLedger,
    (ledgers) =>
      ledgers.withLock(new Account({ kind: "user", id: userId }), (ledger) =>
        ledger.move({ kind: "reserve", amount_usd: Money.decimal(amount), session_id: `s-${newKey()}` }))
  )

const TestLayer = Layer.mergeAll(Wallets.Default, WalletLedger.Default, Events.Default).pipe(
  Layer.provideMerge(TestApp())
)

describe("the event catalog (D17)", () => {
  plain("the README's table lists exactly the catalog's types, in its order", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8")
    const section = readme.slice(
      readme.indexOf("### Events"),
      readme.indexOf("\n### ", readme.indexOf("### Events") + 1)
    )
    const listed = [...section.matchAll(/^\| `([a-z_]+\.[a-z_]+)` \|/gm)].map(([, type]) => type)
    expect(listed).toEqual(eventTypes)
    expect(eventTypes).toContain("wallet.balance_low")
    // The "written" column says what the catalog's flag says: yes for the types the code writes.
    const written = [...section.matchAll(/^\| `([a-z_]+\.[a-z_]+)` \|.*\| (yes|next) \|$/gm)].map(([, type, flag]) => [
      type,
      flag === "yes"
    ])
    expect(written).toEqual(eventTypes.map((type) => [type, catalog[type].emitted]))
  })
})

layer(TestLayer, { excludeTestServices: true })("events", (it) => {
  describe("the OpenAPI document", () => {
    it.effect("declares one event schema per type of the catalog, in the page and the type filter", () =>
      Effect.gen(function*() {
        const doc = (yield* call("GET", "/openapi.json")).body as {
          components: { schemas: Record<string, { properties?: Record<string, { enum?: Array<string> }> }> }
          paths: Record<string, unknown>
        }
        const declared = Object.values(doc.components.schemas).flatMap((schema) => schema.properties?.type?.enum ?? [])
        for (const type of eventTypes) expect(declared).toContain(type)
        expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([
          "/developer/account/alerts",
          "/developer/account/events",
          "/developer/account/events/stream"
        ]))
      }))
  })

  describe("GET/PUT /developer/account/alerts", () => {
    it.effect("version 0 and no thresholds until saved; any member reads", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* call("GET", "/developer/account/alerts", { token: user.token })
        expect(reply.status).toBe(200)
        expect(reply.body).toStrictEqual({ version: 0, thresholds: [], updated_at: null })
      }))

    it.effect("a member who is not an administrator is 403 before the body is looked at", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAlerts(user.token, { thresholds: "nonsense", extra: 1 })
        expect(reply.status).toBe(403)
        expect(reply.body).toMatchObject(problem(403, "forbidden"))
      }))

    it.effect("saves, versions as D5 (omitted is 0, stale is 409 with current_version), amounts at six decimals", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const first = yield* putAlerts(admin.token, {
          thresholds: [{ amount_usd: "25" }, { percent_of_budget: 10 }]
        })
        expect(first.status, JSON.stringify(first.body)).toBe(200)
        expect(first.body).toStrictEqual({
          version: 1,
          thresholds: [{ amount_usd: "25.000000" }, { percent_of_budget: 10 }],
          updated_at: expect.any(String)
        })
        const stale = yield* putAlerts(admin.token, { thresholds: [] })
        expect(stale.status).toBe(409)
        expect(stale.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 1 })
        const second = yield* putAlerts(admin.token, { thresholds: [], expected_version: 1 })
        expect(second.body).toMatchObject({ version: 2, thresholds: [] })
        const read = yield* call("GET", "/developer/account/alerts", { token: admin.token })
        expect(read.body).toMatchObject({ version: 2, thresholds: [] })
      }))

    it.effect("422 for more than 10, a percentage outside 1..100, both kinds in one, unknown fields", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const bodies = [
          { thresholds: Array.from({ length: 11 }, (_, i) => ({ amount_usd: String(i + 1) })) },
          { thresholds: [{ percent_of_budget: 0 }] },
          { thresholds: [{ percent_of_budget: 101 }] },
          { thresholds: [{ percent_of_budget: 12.5 }] },
          { thresholds: [{ amount_usd: "0" }] },
          { thresholds: [{ amount_usd: 5 }] },
          { thresholds: [{ amount_usd: "5", percent_of_budget: 5 }] },
          { thresholds: [{ amount_usd: "5" }], colour: "red" },
          {}
        ]
        for (const body of bodies) {
          const reply = yield* putAlerts(admin.token, body)
          expect(reply.status, JSON.stringify(body)).toBe(422)
          expect(reply.body).toMatchObject(problem(422, "validation_failed"))
        }
        const ten = yield* putAlerts(admin.token, {
          thresholds: Array.from({ length: 10 }, (_, i) => ({ percent_of_budget: i + 1 }))
        })
        expect(ten.status).toBe(200)
      }))
  })

  describe("wallet writes append their events in their transaction", () => {
    it.effect("wallet.budget_set and wallet.credit_added carry the entry and the wallet, as the API shows them", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const set = yield* putBudget(admin.token, { budget_usd: "100", idempotency_key: newKey() })
        const credit = yield* postCredit(admin.token, { amount_usd: "5.5", idempotency_key: newKey(), note: "top" })
        const ledger = pageOf(yield* getLedger(admin.token)).entries
        const page = yield* eventsOf(admin.token)
        expect(page.next_after).toBeNull()
        expect(page.events.map((e) => e.type)).toEqual(["wallet.budget_set", "wallet.credit_added"])
        const [budgetSet, credited] = page.events
        expect(budgetSet).toStrictEqual({
          id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7/),
          type: "wallet.budget_set",
          created_at: expect.stringMatching(/Z$/),
          data: { entry: ledger[1], wallet: walletOf(set) }
        })
        // The credit's answer adds the grant it made (D21); the event's wallet is the wallet alone.
        const { grant: _grant, ...wallet } = walletOf(credit) as unknown as Record<string, unknown>
        expect(credited?.data).toStrictEqual({ entry: ledger[0], wallet })
      }))

    it.effect("a replayed request (the same idempotency key) writes no second event", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const body = { amount_usd: "3", idempotency_key: newKey() }
        expect((yield* postCredit(admin.token, body)).status).toBe(200)
        const replay = yield* postCredit(admin.token, body)
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        expect(yield* typesOf(admin.token)).toEqual(["wallet.credit_added"])
        // A type the code does not write yet is still a type of the catalog: asked for, none.
        expect(yield* eventsOf(admin.token, "type=session.closed")).toEqual({ events: [], next_after: null })
      }))

    it.effect("balance_low, balance_recovered and depleted once per crossing of an amount threshold", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putAlerts(admin.token, { thresholds: [{ amount_usd: "50" }] })
        // A budget of 0 enforces the wallet with nothing available: below 50, and depleted.
        yield* putBudget(admin.token, { budget_usd: "0", idempotency_key: newKey() })
        // Still below 50: no second balance_low; no longer depleted.
        const grants: Array<string> = []
        for (const amount_usd of ["30", "10", "10", "10"]) {
          // The third takes it back to 50 exactly: recovered ("rose back to it").
          const reply = yield* postCredit(admin.token, { amount_usd, idempotency_key: newKey() })
          grants.push((reply.body as { grant: { id: string } }).grant.id)
        }
        // Down below it again, then to zero: a budget cannot be set below the grants' free amounts
        // (D21), so the grants are voided, each a budget decision whose crossings count as a PUT's.
        for (const id of grants) {
          yield* call("POST", `/developer/account/wallet/grants/${id}/void`, {
            token: admin.token,
            body: { idempotency_key: newKey() }
          })
        }
        const page = yield* eventsOf(admin.token)
        expect(page.events.map((e) => e.type)).toEqual([
          "wallet.budget_set",
          "wallet.balance_low",
          "wallet.depleted",
          "wallet.credit_added",
          "wallet.credit_added",
          "wallet.credit_added",
          "wallet.balance_recovered",
          "wallet.credit_added",
          "grant.voided",
          "wallet.balance_low",
          "grant.voided",
          "grant.voided",
          "grant.voided",
          "wallet.depleted"
        ])
        const recovered = page.events[6]
        expect(recovered?.data).toMatchObject({
          threshold: { amount_usd: "50.000000" },
          threshold_usd: "50.000000",
          wallet: { available_usd: "50.000000", version: 4 }
        })
        expect(Object.keys(recovered?.data ?? {})).toEqual(["threshold", "threshold_usd", "wallet"])
        expect(page.events[2]?.data).toStrictEqual({ wallet: expect.objectContaining({ available_usd: "0.000000" }) })
      }))

    it.effect("a percentage threshold is of the budget after the change; what settlement held counts", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putAlerts(admin.token, { thresholds: [{ percent_of_budget: 50 }] })
        yield* putBudget(admin.token, { budget_usd: "100", idempotency_key: newKey() })
        yield* reserve(admin.id, "60")
        // Before: 40 available of 100 (below 50). After: 60 of 120, exactly 50%: recovered.
        yield* putBudget(admin.token, { budget_usd: "120", expected_version: 1, idempotency_key: newKey() })
        const page = yield* eventsOf(admin.token)
        expect(page.events.map((e) => e.type)).toEqual([
          "wallet.budget_set",
          "wallet.budget_set",
          "wallet.balance_recovered"
        ])
        expect(page.events[2]?.data).toMatchObject({
          threshold: { percent_of_budget: 50 },
          threshold_usd: "60.000000",
          wallet: { budget_usd: "120.000000", available_usd: "60.000000" }
        })
      }))

    it.effect("a change that fails or rolls back leaves no event", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const account = new Account({ kind: "user", id: admin.id })
        yield* putAlerts(admin.token, { thresholds: [{ amount_usd: "1000" }] })
        // Refused before the write: a stale version, a budget below what is committed.
        expect(
          (yield* putBudget(admin.token, { budget_usd: "5", expected_version: 3, idempotency_key: newKey() }))
            .status
        ).toBe(409)
        // A change whose transaction fails after its events were appended.
        const sql = yield* SqlClient.SqlClient
        const wallets = yield* Wallets
        const failed = yield* sql.withTransaction(
          Effect.zipRight(
            wallets.setBudget(account, { budget_usd: Money.decimal("10") }),
            Effect.fail("forced failure after the append" as const)
          )
        ).pipe(Effect.flip)
        expect(failed).toBe("forced failure after the append")
        expect((yield* eventsOf(admin.token)).events).toEqual([])
        expect(pageOf(yield* getLedger(admin.token)).entries).toEqual([])
        // The same change committed is logged: the rollback, not the path, left nothing.
        yield* wallets.setBudget(account, { budget_usd: Money.decimal("10") })
        expect(yield* typesOf(admin.token)).toEqual(["wallet.budget_set", "wallet.balance_low"])
      }))
  })

  describe("GET /developer/account/events", () => {
    it.effect("pages oldest first with next_after; the type filter; limits", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putBudget(admin.token, { budget_usd: "1", idempotency_key: newKey() })
        for (let i = 0; i < 4; i++) yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })
        const all = (yield* eventsOf(admin.token)).events
        expect(all).toHaveLength(5)
        const first = yield* eventsOf(admin.token, "limit=2")
        expect(first.events).toEqual(all.slice(0, 2))
        expect(first.next_after).toBe(all[1]?.id)
        const second = yield* eventsOf(admin.token, `limit=2&after=${first.next_after}`)
        expect(second.events).toEqual(all.slice(2, 4))
        const third = yield* eventsOf(admin.token, `limit=2&after=${second.next_after}`)
        expect(third).toEqual({ events: all.slice(4), next_after: null })
        // Caught up: nothing after the newest, and null to say so.
        expect(yield* eventsOf(admin.token, `after=${all[4]?.id}`)).toEqual({ events: [], next_after: null })
        const credits = yield* eventsOf(admin.token, `type=wallet.credit_added&after=${all[0]?.id}&limit=3`)
        expect(credits.events).toEqual(all.slice(1, 4))
        expect(credits.next_after).toBe(all[3]?.id)
        for (const query of ["limit=0", "limit=501", "limit=x", "type=wallet.unknown", "type="]) {
          const reply = yield* getEvents(admin.token, query)
          expect(reply.status, query).toBe(422)
        }
      }))

    it.effect("order=newest: the newest limit events, newest first, of one type or all, in one page", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const other = yield* signedInUser({ admin: true })
        yield* putBudget(other.token, { budget_usd: "1", idempotency_key: newKey() })
        yield* putBudget(admin.token, { budget_usd: "1", idempotency_key: newKey() })
        for (let i = 0; i < 4; i++) yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })
        // Not below the grants' free 4 (D21).
        const again = yield* putBudget(admin.token, { budget_usd: "6", expected_version: 5, idempotency_key: newKey() })
        expect(again.status, JSON.stringify(again.body)).toBe(200)
        const all = (yield* eventsOf(admin.token)).events
        expect(all.map((e) => e.type)).toEqual([
          "wallet.budget_set",
          ...Array.from({ length: 4 }, () => "wallet.credit_added"),
          "wallet.budget_set"
        ])
        const newestFirst = [...all].reverse()
        expect(yield* eventsOf(admin.token, "order=newest")).toEqual({ events: newestFirst, next_after: null })
        expect(yield* eventsOf(admin.token, "order=newest&limit=2")).toEqual({
          events: newestFirst.slice(0, 2),
          next_after: null
        })
        expect((yield* eventsOf(admin.token, "order=newest&type=wallet.credit_added&limit=3")).events)
          .toEqual([all[4], all[3], all[2]])
        expect((yield* eventsOf(admin.token, "order=newest&type=wallet.budget_set")).events).toEqual([all[5], all[0]])
        // Another account's log is not this one's.
        expect((yield* eventsOf(other.token, "order=newest")).events.map((e) => e.type)).toEqual(["wallet.budget_set"])
        // oldest is the default, and pages as before.
        const oldest = yield* eventsOf(admin.token, "order=oldest&limit=2")
        expect(oldest).toEqual({ events: all.slice(0, 2), next_after: all[1]?.id })
        expect(yield* eventsOf(admin.token, "limit=2")).toEqual(oldest)
        expect(yield* eventsOf(admin.token, `order=oldest&after=${all[3]?.id}`)).toEqual({
          events: all.slice(4),
          next_after: null
        })
      }))

    it.effect("after with order=newest is 422 at #/query/after; an unknown order is 422 at #/query/order", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putBudget(admin.token, { budget_usd: "1", idempotency_key: newKey() })
        const [event] = (yield* eventsOf(admin.token)).events
        const withAfter = yield* getEvents(admin.token, `order=newest&after=${event?.id}`)
        expect(withAfter.status).toBe(422)
        expect(withAfter.body).toMatchObject({
          ...problem(422, "validation_failed"),
          errors: [{ pointer: "#/query/after", detail: expect.stringMatching(/oldest first/) }]
        })
        for (const order of ["latest", "", "NEWEST", "newest,oldest"]) {
          const reply = yield* getEvents(admin.token, `order=${order}`)
          expect(reply.status, order).toBe(422)
          expect(reply.body, order).toMatchObject({
            ...problem(422, "validation_failed"),
            errors: [{ pointer: "#/query/order", detail: "must be oldest or newest" }]
          })
        }
      }))

    it.effect("an after unknown to the account is 404 event_not_found: another account's, never written, or not an id", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const other = yield* signedInUser({ admin: true })
        yield* putBudget(other.token, { budget_usd: "1", idempotency_key: newKey() })
        const [theirs] = (yield* eventsOf(other.token)).events
        for (const after of [theirs?.id, "0190b9d2-0000-7000-8000-000000000000", "nope"]) {
          const reply = yield* getEvents(admin.token, `after=${after}`)
          expect(reply.status, after).toBe(404)
          expect(reply.body).toMatchObject(problem(404, "event_not_found"))
        }
        expect((yield* eventsOf(admin.token)).events).toEqual([])
      }))

    it.effect("unauthenticated is 401", () =>
      Effect.gen(function*() {
        expect((yield* call("GET", "/developer/account/events")).status).toBe(401)
        expect((yield* call("GET", "/developer/account/events/stream")).status).toBe(401)
        expect((yield* call("GET", "/developer/account/alerts")).status).toBe(401)
      }))
  })

  describe("the log is append-only, but for the pruning after 30 days", () => {
    it.effect("the database refuses updates and deletes of events younger than 30 days; pruning removes only older", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const events = yield* Events
        const admin = yield* signedInUser({ admin: true })
        yield* putBudget(admin.token, { budget_usd: "1", idempotency_key: newKey() })
        const [young] = (yield* eventsOf(admin.token)).events
        const refused = (statement: Effect.Effect<unknown, unknown>) =>
          Effect.map(Effect.flip(statement), (error) => error instanceof Error ? String(error.cause) : String(error))
        expect(yield* refused(sql`UPDATE account_events SET type = 'wallet.depleted' WHERE id = ${young?.id ?? ""}`))
          .toMatch(/append-only/)
        expect(yield* refused(sql`DELETE FROM account_events WHERE id = ${young?.id ?? ""}`)).toMatch(/append-only/)
        expect(yield* refused(sql`TRUNCATE account_events`)).toMatch(/append-only/)
        // An event written 31 days ago (as the clock then would have), and one of 29 days.
        yield* sql`INSERT INTO account_events (account_kind, account_id, position, type, data, created_at) VALUES
          ('user', ${admin.id}, 1000, 'wallet.depleted', '{}', now() - interval '31 days'),
          ('user', ${admin.id}, 1001, 'wallet.depleted', '{}', now() - interval '29 days')`
        let deleted = 0
        for (let pruned = -1; pruned !== 0;) {
          pruned = yield* events.prune(1000)
          deleted += pruned
        }
        expect(deleted).toBeGreaterThanOrEqual(1)
        const left = yield* sql<{ position: string }>`
          SELECT position FROM account_events WHERE account_id = ${admin.id} ORDER BY position`
        expect(left.map((row) => Number(row.position))).toEqual([1, 1001])
      }))
  })

  describe("the catalog drives the writer", () => {
    it("every type has a data schema and a description", () => {
      for (const type of eventTypes) {
        expect(catalog[type].description.length, type).toBeGreaterThan(10)
      }
    })
  })
})
