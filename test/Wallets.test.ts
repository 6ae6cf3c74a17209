import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { Accounts } from "../src/Accounts.js"
import { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { Wallets } from "../src/Wallets.js"
import { WalletLedger } from "../src/Wallets/Ledger.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import {
  awaitClaimedKey,
  getLedger,
  getWallet,
  holdWalletLock,
  newKey,
  pageOf,
  postCredit,
  putBudget,
  walletOf
} from "./support/Wallets.js"

const problem = (status: number, code: string) => ({ type: "about:blank", status, code })

const pointersOf = (body: unknown) =>
  (body as { errors: ReadonlyArray<{ pointer: string }> }).errors.map((e) => e.pointer).sort()

const isoTimestamp = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)

/** Puts some of the budget on hold and some spent, as the settlement worker would. */
const commit = (userId: string, reserved: string, spent: string) =>
  Effect.flatMap(
    WalletLedger,
    (ledgers) =>
      ledgers.withLock(new Account({ kind: "user", id: userId }), (ledger) =>
        ledger.moveAll([
          { kind: "reserve", amount_usd: Money.decimal(reserved).plus(Money.decimal(spent)), session_id: "session-1" },
          ...(Money.decimal(spent).isZero() ? [] : [{
            kind: "spend" as const,
            amount_usd: Money.decimal(spent),
            from_reserved_usd: Money.decimal(spent),
            session_id: "session-1"
          }])
        ]))
  )

const TestLayer = Layer.merge(Wallets.Default, WalletLedger.Default).pipe(Layer.provideMerge(TestApp()))

layer(TestLayer, { excludeTestServices: true })("wallet", (it) => {
  describe("GET /developer/account/wallet", () => {
    it.effect("a new account's wallet is created on first read: version 0, zeros, not enforced", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* getWallet(user.token)
        expect(reply.status).toBe(200)
        expect(reply.body).toStrictEqual({
          id: expect.any(String),
          owner_kind: "user",
          owner_id: user.id,
          currency: "USD",
          budget_usd: "0.000000",
          reserved_usd: "0.000000",
          spent_usd: "0.000000",
          available_usd: "0.000000",
          enforced: false,
          version: 0,
          created_at: isoTimestamp,
          updated_at: isoTimestamp,
          // The soonest grant to expire (D21): none.
          next_expiry: null
        })
        expect(Object.keys(reply.body as object)).toEqual([
          "id",
          "owner_kind",
          "owner_id",
          "currency",
          "budget_usd",
          "reserved_usd",
          "spent_usd",
          "available_usd",
          "enforced",
          "version",
          "created_at",
          "updated_at",
          "next_expiry"
        ])
        expect(yield* getWallet(user.token)).toMatchObject({ status: 200, body: reply.body })
      }))

    it.effect("concurrent first reads all see the same single wallet", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const replies = yield* Effect.all(Array.from({ length: 10 }, () => getWallet(user.token)), {
          concurrency: "unbounded"
        })
        expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200))
        expect(new Set(replies.map((r) => walletOf(r).id)).size).toBe(1)
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql`SELECT id FROM wallets WHERE account_id = ${user.id}`
        expect(rows).toHaveLength(1)
      }))

    it.effect("members of an organisation share the organisation's wallet", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const organisation = yield* accounts.createOrganisation("Acme")
        const ada = yield* signedInUser({ organisationId: organisation.id })
        const bob = yield* signedInUser({ organisationId: organisation.id })
        const set = yield* putBudget(ada.token, { budget_usd: "40", idempotency_key: newKey() })
        expect(walletOf(set)).toMatchObject({ owner_kind: "client", owner_id: organisation.id })
        expect(walletOf(yield* getWallet(bob.token))).toMatchObject({ budget_usd: "40.000000", version: 1 })
      }))

    it.effect("without a token it is 401 unauthenticated", () =>
      Effect.gen(function*() {
        for (
          const reply of [
            yield* call("GET", "/developer/account/wallet"),
            yield* call("PUT", "/developer/account/wallet", { body: { budget_usd: "1", idempotency_key: "k" } }),
            yield* call("POST", "/developer/account/wallet/credits", { body: {} }),
            yield* call("GET", "/developer/account/wallet/ledger?limit=0")
          ]
        ) {
          expect(reply.status).toBe(401)
          expect(reply.body).toMatchObject(problem(401, "unauthenticated"))
        }
      }))
  })

  describe("PUT /developer/account/wallet", () => {
    it.effect("sets the total budget: version 1, enforced, and a budget_set entry with the note", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        // The read's next_expiry (D21) is the read's own; a PUT answers the wallet.
        const { next_expiry: _next, ...before } = walletOf(yield* getWallet(user.token)) as unknown as Record<
          string,
          unknown
        >
        const reply = yield* putBudget(user.token, { budget_usd: "12.5", idempotency_key: newKey(), note: "Q3" })
        expect(reply.status).toBe(200)
        expect(reply.headers["idempotent-replayed"]).toBeUndefined()
        expect(reply.body).toStrictEqual({
          ...before,
          budget_usd: "12.500000",
          available_usd: "12.500000",
          enforced: true,
          version: 1,
          updated_at: isoTimestamp
        })
        expect(yield* getWallet(user.token)).toMatchObject({ body: reply.body })
        const [entry] = pageOf(yield* getLedger(user.token)).entries
        expect(entry).toMatchObject({
          sequence: 1,
          kind: "budget_set",
          amount_usd: "12.500000",
          budget_after_usd: "12.500000",
          available_after_usd: "12.500000",
          note: "Q3",
          payment_provider: null
        })
      }))

    it.effect("budget_set records the signed change: lowering the budget is a negative amount", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putBudget(user.token, { budget_usd: "10", idempotency_key: newKey() })
        const lowered = yield* putBudget(user.token, {
          budget_usd: "2.75",
          expected_version: 1,
          idempotency_key: newKey()
        })
        expect(walletOf(lowered)).toMatchObject({ budget_usd: "2.750000", version: 2 })
        const [latest] = pageOf(yield* getLedger(user.token)).entries
        expect(latest).toMatchObject({ sequence: 2, kind: "budget_set", amount_usd: "-7.250000", note: null })
      }))

    it.effect("an omitted expected_version means 0, so a second write without it is 409 version_conflict", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        expect((yield* putBudget(user.token, { budget_usd: "1", idempotency_key: newKey() })).status).toBe(200)
        const reply = yield* putBudget(user.token, { budget_usd: "2", idempotency_key: newKey() })
        expect(reply.status).toBe(409)
        expect(reply.body).toStrictEqual({
          ...problem(409, "version_conflict"),
          title: "Conflict",
          detail: expect.any(String),
          current_version: 1
        })
      }))

    it.effect("a stale expected_version is 409 with the current version, and nothing changes", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putBudget(user.token, { budget_usd: "1", idempotency_key: newKey() })
        yield* putBudget(user.token, { budget_usd: "2", expected_version: 1, idempotency_key: newKey() })
        const before = yield* getWallet(user.token)
        const reply = yield* putBudget(user.token, { budget_usd: "3", expected_version: 1, idempotency_key: newKey() })
        expect(reply.status).toBe(409)
        expect(reply.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 2 })
        expect((yield* getWallet(user.token)).body).toEqual(before.body)
        expect(pageOf(yield* getLedger(user.token)).entries).toHaveLength(2)
      }))

    it.effect("a budget below spent plus reserved is 409 budget_below_committed with the minimum", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putBudget(user.token, { budget_usd: "10", idempotency_key: newKey() })
        yield* commit(user.id, "3.25", "1.5")
        const reply = yield* putBudget(user.token, {
          budget_usd: "4.749999",
          expected_version: 1,
          idempotency_key: newKey()
        })
        expect(reply.status).toBe(409)
        expect(reply.body).toStrictEqual({
          ...problem(409, "budget_below_committed"),
          title: "Conflict",
          detail: expect.any(String),
          minimum_budget_usd: "4.750000"
        })
        expect(walletOf(yield* getWallet(user.token))).toMatchObject({ budget_usd: "10.000000", version: 1 })
        const exact = yield* putBudget(user.token, {
          budget_usd: "4.75",
          expected_version: 1,
          idempotency_key: newKey()
        })
        expect(walletOf(exact)).toMatchObject({
          budget_usd: "4.750000",
          reserved_usd: "3.250000",
          spent_usd: "1.500000",
          available_usd: "0.000000",
          version: 2
        })
      }))

    it.effect("the version is checked before the budget floor", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putBudget(user.token, { budget_usd: "10", idempotency_key: newKey() })
        yield* commit(user.id, "5", "0")
        const reply = yield* putBudget(user.token, { budget_usd: "1", expected_version: 0, idempotency_key: newKey() })
        expect(reply.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 1 })
      }))

    it.effect("amounts are decimal strings: a number, a sign, an exponent, seven decimals or \"\" is 422", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const cases: ReadonlyArray<readonly [unknown, string]> = [
          [5, "must be a decimal string such as \"12.50\", not a JSON number"],
          ["-5", "must not have a sign"],
          ["+5", "must not have a sign"],
          ["5e2", "must not use an exponent"],
          ["1.0000001", "must have at most 6 decimals"],
          ["", "must not be empty"],
          ["1000000000000", "must have at most 12 digits before the decimal point"],
          ["five", "must be a decimal string such as \"12.50\""],
          [null, "must be a decimal string such as \"12.50\""]
        ]
        for (const [budget_usd, detail] of cases) {
          const reply = yield* putBudget(user.token, { budget_usd, idempotency_key: newKey() })
          expect(reply.status, String(budget_usd)).toBe(422)
          expect(reply.body).toMatchObject({
            ...problem(422, "validation_failed"),
            errors: [{ pointer: "#/budget_usd", detail }]
          })
        }
        expect(walletOf(yield* getWallet(user.token))).toMatchObject({ version: 0, enforced: false })
      }))

    it.effect("every offending field is listed: missing key, mistyped amount, unknown field, bad version", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putBudget(user.token, { budget_usd: 5, expected_version: -1, note: 7, extra: true })
        expect(reply.status).toBe(422)
        expect(pointersOf(reply.body)).toEqual([
          "#/budget_usd",
          "#/expected_version",
          "#/extra",
          "#/idempotency_key",
          "#/note"
        ])
      }))

    it.effect("idempotency_key is 1 to 255 characters", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const key of ["", "k".repeat(256)]) {
          const reply = yield* putBudget(user.token, { budget_usd: "1", idempotency_key: key })
          expect(reply.status).toBe(422)
          expect(reply.body).toMatchObject({ errors: [{ pointer: "#/idempotency_key" }] })
        }
        expect((yield* putBudget(user.token, { budget_usd: "1", idempotency_key: "é".repeat(255) })).status).toBe(200)
      }))

    it.effect("a body that is empty, not JSON, or not an object, is 422", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const rawBody of ["{budget", ""]) {
          const notJson = yield* call("PUT", "/developer/account/wallet", { token: user.token, rawBody })
          expect(notJson.status).toBe(422)
          expect(notJson.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#" }] })
        }
        const array = yield* call("PUT", "/developer/account/wallet", { token: user.token, body: [1] })
        expect(array.status).toBe(422)
        expect(array.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#" }] })
      }))
  })

  describe("idempotency of wallet mutations", () => {
    it.effect("the same key and request replays the first success exactly, even after the wallet changed and with a stale expected_version", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const key = newKey()
        const first = yield* putBudget(user.token, { budget_usd: "5", idempotency_key: key, note: "first" })
        expect(first.status).toBe(200)
        yield* putBudget(user.token, { budget_usd: "9", expected_version: 1, idempotency_key: newKey() })
        const retry = yield* putBudget(user.token, {
          budget_usd: "5.000000",
          expected_version: 0,
          idempotency_key: key,
          note: "first"
        })
        expect(retry.status).toBe(200)
        expect(retry.headers["idempotent-replayed"]).toBe("true")
        expect(retry.body).toStrictEqual(first.body)
        expect(Object.keys(retry.body as object)).toEqual(Object.keys(first.body as object))
        expect(walletOf(yield* getWallet(user.token))).toMatchObject({ budget_usd: "9.000000", version: 2 })
        expect(pageOf(yield* getLedger(user.token)).entries).toHaveLength(2)
      }))

    it.effect("the same key with another amount, note or endpoint is 422 idempotency_key_reused, applying nothing", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser({ admin: true })
        const key = newKey()
        yield* putBudget(user.token, { budget_usd: "5", idempotency_key: key, note: "a" })
        const others = [
          yield* putBudget(user.token, { budget_usd: "6", expected_version: 1, idempotency_key: key, note: "a" }),
          yield* putBudget(user.token, { budget_usd: "5", expected_version: 1, idempotency_key: key, note: "b" }),
          yield* putBudget(user.token, { budget_usd: "5", expected_version: 1, idempotency_key: key }),
          yield* postCredit(user.token, { amount_usd: "5", idempotency_key: key, note: "a" })
        ]
        for (const reply of others) {
          expect(reply.status).toBe(422)
          expect(reply.body).toStrictEqual({
            ...problem(422, "idempotency_key_reused"),
            title: "Unprocessable Content",
            detail: expect.any(String)
          })
        }
        expect(walletOf(yield* getWallet(user.token))).toMatchObject({ budget_usd: "5.000000", version: 1 })
      }))

    it.effect("the key is looked up before the body is validated: an invalid body under a used key is idempotency_key_reused", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const key = newKey()
        yield* putBudget(user.token, { budget_usd: "5", idempotency_key: key })
        const reply = yield* putBudget(user.token, { budget_usd: 5, idempotency_key: key })
        expect(reply.body).toMatchObject(problem(422, "idempotency_key_reused"))
        // expected_version is not compared, even when it is not valid.
        const replay = yield* putBudget(user.token, { budget_usd: "5", expected_version: "x", idempotency_key: key })
        expect(replay.status).toBe(200)
        expect(replay.headers["idempotent-replayed"]).toBe("true")
      }))

    it.effect("failures are not recorded: a retry with the same key after a 409 or a 422 runs again", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putBudget(user.token, { budget_usd: "1", idempotency_key: newKey() })
        const key = newKey()
        expect((yield* putBudget(user.token, { budget_usd: "2", idempotency_key: key })).status).toBe(409)
        expect(
          (yield* putBudget(user.token, { budget_usd: "2", expected_version: 1, idempotency_key: key, x: 1 })).status
        )
          .toBe(422)
        const retry = yield* putBudget(user.token, { budget_usd: "2", expected_version: 1, idempotency_key: key })
        expect(retry.status).toBe(200)
        expect(retry.headers["idempotent-replayed"]).toBeUndefined()
        expect(walletOf(retry)).toMatchObject({ budget_usd: "2.000000", version: 2 })
      }))

    it.effect("keys are scoped to the account", () =>
      Effect.gen(function*() {
        const ada = yield* signedInUser()
        const bob = yield* signedInUser()
        const key = newKey()
        const first = yield* putBudget(ada.token, { budget_usd: "5", idempotency_key: key })
        const second = yield* putBudget(bob.token, { budget_usd: "7", idempotency_key: key })
        expect(second.status).toBe(200)
        expect(second.headers["idempotent-replayed"]).toBeUndefined()
        expect(walletOf(second)).toMatchObject({ owner_id: bob.id, budget_usd: "7.000000" })
        expect(walletOf(first)).toMatchObject({ owner_id: ada.id, budget_usd: "5.000000" })
      }))

    it.effect("a duplicate arriving while the first is still running is 409 idempotency_in_progress with Retry-After: 1, at once", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* getWallet(user.token)
        const key = newKey()
        const body = { budget_usd: "3", idempotency_key: key }
        const lock = yield* holdWalletLock(user.id, 800)
        const first = yield* Effect.fork(putBudget(user.token, body))
        yield* awaitClaimedKey
        const started = Date.now()
        const duplicate = yield* putBudget(user.token, body)
        expect(Date.now() - started).toBeLessThan(500)
        expect(duplicate.status).toBe(409)
        expect(duplicate.headers["retry-after"]).toBe("1")
        expect(duplicate.body).toMatchObject(problem(409, "idempotency_in_progress"))
        yield* Fiber.join(lock)
        const applied = yield* Fiber.join(first)
        expect(applied.status).toBe(200)
        const retried = yield* putBudget(user.token, body)
        expect(retried.headers["idempotent-replayed"]).toBe("true")
        expect(retried.body).toStrictEqual(applied.body)
      }))

    it.effect("50 concurrent requests with one key apply exactly once; the others replay it or are told it is in progress", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* getWallet(user.token)
        const body = { budget_usd: "50", idempotency_key: newKey() }
        const replies = yield* Effect.all(Array.from({ length: 50 }, () => putBudget(user.token, body)), {
          concurrency: "unbounded"
        })
        const applied = replies.filter((r) => r.status === 200 && r.headers["idempotent-replayed"] === undefined)
        const replayed = replies.filter((r) => r.status === 200 && r.headers["idempotent-replayed"] === "true")
        const inProgress = replies.filter((r) => r.status === 409)
        expect(applied).toHaveLength(1)
        expect(replayed.length + inProgress.length).toBe(49)
        for (const reply of replayed) expect(reply.body).toStrictEqual(applied[0]?.body)
        for (const reply of inProgress) {
          expect(reply.body).toMatchObject(problem(409, "idempotency_in_progress"))
          expect(reply.headers["retry-after"]).toBe("1")
        }
        expect(walletOf(yield* getWallet(user.token))).toMatchObject({ budget_usd: "50.000000", version: 1 })
        expect(pageOf(yield* getLedger(user.token)).entries).toHaveLength(1)
      }))

    it.effect("concurrent budget writes with one expected_version: exactly one wins, the rest are 409 version_conflict", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* getWallet(user.token)
        const replies = yield* Effect.all(
          Array.from(
            { length: 20 },
            (_, i) =>
              putBudget(user.token, { budget_usd: String(i + 1), expected_version: 0, idempotency_key: newKey() })
          ),
          { concurrency: "unbounded" }
        )
        const winners = replies.filter((r) => r.status === 200)
        expect(winners).toHaveLength(1)
        for (const reply of replies.filter((r) => r.status !== 200)) {
          expect(reply.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 1 })
        }
        expect(yield* getWallet(user.token)).toMatchObject({ body: winners[0]?.body })
        expect(pageOf(yield* getLedger(user.token)).entries).toHaveLength(1)
      }))

    it.effect(
      "a wallet locked past the 2 s lock timeout is 503 unavailable with Retry-After, and nothing is applied or recorded",
      () =>
        Effect.gen(function*() {
          const user = yield* signedInUser()
          yield* getWallet(user.token)
          const body = { budget_usd: "8", idempotency_key: newKey() }
          const lock = yield* holdWalletLock(user.id, 3_000)
          const started = Date.now()
          const reply = yield* putBudget(user.token, body)
          expect(Date.now() - started).toBeGreaterThanOrEqual(1_900)
          expect(reply.status).toBe(503)
          expect(reply.headers["retry-after"]).toBe("2")
          expect(reply.body).toMatchObject(problem(503, "unavailable"))
          yield* Fiber.interrupt(lock)
          expect(walletOf(yield* getWallet(user.token))).toMatchObject({ version: 0, budget_usd: "0.000000" })
          const retry = yield* putBudget(user.token, body)
          expect(retry.status).toBe(200)
          expect(retry.headers["idempotent-replayed"]).toBeUndefined()
        }),
      15_000
    )
  })

  describe("POST /developer/account/wallet/credits", () => {
    it.effect("an administrator adds credit: the budget grows, the version counts it, enforcement turns on", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })
        const reply = yield* postCredit(admin.token, { amount_usd: "2.5", idempotency_key: newKey(), note: "goodwill" })
        expect(reply.status).toBe(200)
        expect(walletOf(reply)).toMatchObject({
          budget_usd: "12.500000",
          available_usd: "12.500000",
          enforced: true,
          version: 2
        })
        const [entry] = pageOf(yield* getLedger(admin.token)).entries
        expect(entry).toMatchObject({
          sequence: 2,
          kind: "credit_added",
          amount_usd: "2.500000",
          budget_after_usd: "12.500000",
          note: "goodwill",
          payment_provider: null,
          session_id: null,
          task_id: null
        })
      }))

    it.effect("a credit on a new wallet turns enforcement on", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const reply = yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })
        expect(walletOf(reply)).toMatchObject({ budget_usd: "1.000000", enforced: true, version: 1 })
      }))

    it.effect("a non-administrator is 403 forbidden before anything else is looked at", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (
          const body of [
            { amount_usd: "1", idempotency_key: newKey() },
            { amount_usd: -1 },
            {}
          ]
        ) {
          const reply = yield* postCredit(user.token, body)
          expect(reply.status).toBe(403)
          expect(reply.body).toStrictEqual({
            ...problem(403, "forbidden"),
            title: "Forbidden",
            detail: expect.any(String)
          })
        }
        const notJson = yield* call("POST", "/developer/account/wallet/credits", { token: user.token, rawBody: "{" })
        expect(notJson.status).toBe(403)
        expect(walletOf(yield* getWallet(user.token))).toMatchObject({ version: 0 })
      }))

    it.effect("the amount must be above zero, and credits take no expected_version", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const zero = yield* postCredit(admin.token, { amount_usd: "0.000000", idempotency_key: newKey() })
        expect(zero.status).toBe(422)
        expect(zero.body).toMatchObject({ errors: [{ pointer: "#/amount_usd", detail: "must be above zero" }] })
        const versioned = yield* postCredit(admin.token, {
          amount_usd: "1",
          expected_version: 0,
          idempotency_key: newKey()
        })
        expect(versioned.status).toBe(422)
        expect(versioned.body).toMatchObject({
          errors: [{ pointer: "#/expected_version", detail: "is not a known field" }]
        })
        const missing = yield* postCredit(admin.token, { idempotency_key: newKey() })
        expect(missing.body).toMatchObject({ errors: [{ pointer: "#/amount_usd", detail: "is required" }] })
      }))

    it.effect("a credit that would raise the budget above the largest amount is 422", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putBudget(admin.token, { budget_usd: "999999999999", idempotency_key: newKey() })
        const reply = yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#/amount_usd" }] })
        const fits = yield* postCredit(admin.token, { amount_usd: "0.999999", idempotency_key: newKey() })
        expect(walletOf(fits)).toMatchObject({ budget_usd: "999999999999.999999" })
      }))

    it.effect("a retried credit with the same key is replayed, not added twice", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const body = { amount_usd: "4", idempotency_key: newKey() }
        const first = yield* postCredit(admin.token, body)
        const retry = yield* postCredit(admin.token, { ...body, amount_usd: "4.0" })
        expect(retry.status).toBe(200)
        expect(retry.headers["idempotent-replayed"]).toBe("true")
        expect(retry.body).toStrictEqual(first.body)
        expect(walletOf(yield* getWallet(admin.token))).toMatchObject({ budget_usd: "4.000000", version: 1 })
      }))
  })

  describe("GET /developer/account/wallet/ledger", () => {
    it.effect("a new account's ledger is empty", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* getLedger(user.token)
        expect(reply.status).toBe(200)
        expect(reply.body).toStrictEqual({ entries: [], next_before: null })
      }))

    it.effect("lists entries newest first with every field, and pages backwards with before", () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })
        yield* postCredit(admin.token, { amount_usd: "5", idempotency_key: newKey() })
        yield* commit(admin.id, "1", "14.25")
        const all = pageOf(yield* getLedger(admin.token))
        expect(all.next_before).toBeNull()
        expect(all.entries.map((e) => [e.sequence, e.kind])).toEqual([
          [4, "spend"],
          [3, "reserve"],
          [2, "credit_added"],
          [1, "budget_set"]
        ])
        expect(all.entries[0]).toStrictEqual({
          id: expect.any(String),
          sequence: 4,
          kind: "spend",
          amount_usd: "14.250000",
          budget_after_usd: "15.000000",
          reserved_after_usd: "1.000000",
          spent_after_usd: "14.250000",
          available_after_usd: "-0.250000",
          payment_provider: null,
          session_id: "session-1",
          task_id: null,
          note: null,
          repository_id: null,
          user_id: null,
          model: null,
          labels: {},
          grants: [],
          created_at: isoTimestamp
        })
        expect(walletOf(yield* getWallet(admin.token)).available_usd).toBe("-0.250000")
        const first = pageOf(yield* getLedger(admin.token, "limit=3"))
        expect(first.entries.map((e) => e.sequence)).toEqual([4, 3, 2])
        expect(first.next_before).toBe(first.entries[2]?.id)
        const second = pageOf(yield* getLedger(admin.token, `limit=3&before=${first.next_before}`))
        expect(second).toStrictEqual({ entries: [all.entries[3]], next_before: null })
      }))

    it.effect("an unknown before, or another account's entry, is 404 ledger_entry_not_found", () =>
      Effect.gen(function*() {
        const ada = yield* signedInUser()
        const bob = yield* signedInUser()
        yield* putBudget(ada.token, { budget_usd: "1", idempotency_key: newKey() })
        yield* putBudget(bob.token, { budget_usd: "1", idempotency_key: newKey() })
        const adaEntry = pageOf(yield* getLedger(ada.token)).entries[0]?.id
        for (const before of [adaEntry, "00000000-0000-7000-8000-000000000000"]) {
          const reply = yield* getLedger(bob.token, `before=${before}`)
          expect(reply.status).toBe(404)
          expect(reply.body).toStrictEqual({
            ...problem(404, "ledger_entry_not_found"),
            title: "Not Found",
            detail: expect.any(String)
          })
        }
        const fresh = yield* signedInUser()
        expect((yield* getLedger(fresh.token, `before=${adaEntry}`)).status).toBe(404)
      }))

    it.effect("a before that is not a UUID, or a limit outside 1 to 500 or not an integer, is 422 with a query pointer", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["before=abc", "#/query/before"],
          ["limit=0", "#/query/limit"],
          ["limit=501", "#/query/limit"],
          ["limit=1.5", "#/query/limit"],
          ["limit=abc", "#/query/limit"],
          ["limit=", "#/query/limit"],
          ["limit=-1", "#/query/limit"],
          ["limit=1e2", "#/query/limit"]
        ]
        for (const [query, pointer] of cases) {
          const reply = yield* getLedger(user.token, query)
          expect(reply.status, query).toBe(422)
          expect(reply.body).toMatchObject({ ...problem(422, "validation_failed"), errors: [{ pointer }] })
        }
        expect((yield* getLedger(user.token, "limit=500")).status).toBe(200)
        expect((yield* getLedger(user.token, "limit=1")).status).toBe(200)
      }))
  })
})
