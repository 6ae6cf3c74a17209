import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, layer } from "@effect/vitest"
import { DateTime, Effect, Ref } from "effect"
import { randomUUID } from "node:crypto"
import { Api } from "../src/Api.js"
import * as Money from "../src/Domain/Money.js"
import { DEFAULTS } from "./support/policies.js"
import { createUser, PASSWORD, TestApp } from "./support/TestApp.js"

/**
 * The contract as a typed client sees it (D9): `HttpApiClient.make(Api)`
 * derives every request and answer from `src/Api.ts`, so what this suite
 * sends and decodes is exactly what the contract promises, typed errors
 * included. Statuses are read off each answer as it arrives.
 */

/** A typed client, signed in with `token` when given, that records the status of every answer. */
const clientFor = (token?: string) =>
  Effect.gen(function*() {
    const statuses = yield* Ref.make<ReadonlyArray<number>>([])
    const client = yield* HttpApiClient.make(Api, {
      transformClient: (http) =>
        http.pipe(
          HttpClient.mapRequest((request) =>
            token === undefined ? request : HttpClientRequest.bearerToken(request, token)
          ),
          HttpClient.tap((response) => Ref.update(statuses, (all) => [...all, response.status]))
        )
    })
    const lastStatus = Effect.map(Ref.get(statuses), (all) => all.at(-1))
    return { client, lastStatus } as const
  })

const signedIn = (options: { readonly admin?: boolean } = {}) =>
  Effect.gen(function*() {
    const user = yield* createUser(options)
    const { client, lastStatus } = yield* clientFor()
    const login = yield* client.auth.login({ payload: { email: user.email, password: PASSWORD } })
    expect(yield* lastStatus).toBe(200)
    return { ...user, login, ...(yield* clientFor(login.access_token)) }
  })

layer(TestApp(), { excludeTestServices: true, timeout: "60 seconds" })("the API through its typed client", (it) => {
  describe("sign-in", () => {
    it.effect("signs in, reads who it is, and a wrong password is InvalidCredentials (401)", () =>
      Effect.gen(function*() {
        const user = yield* signedIn()
        expect(user.login).toMatchObject({ token_type: "bearer", user: { id: user.id, email: user.email } })
        expect(user.login.expires_in).toBeGreaterThan(0)

        const me = yield* user.client.auth.me()
        expect(yield* user.lastStatus).toBe(200)
        expect(me.user).toMatchObject({ id: user.id, email: user.email, is_admin: false })
        expect(me.account).toMatchObject({ kind: "user", id: user.id })
        expect(DateTime.toEpochMillis(me.session.expires_at)).toBe(DateTime.toEpochMillis(user.login.expires_at))

        const anonymous = yield* clientFor()
        const refused = yield* Effect.flip(
          anonymous.client.auth.login({ payload: { email: user.email, password: "not the password" } })
        )
        expect(yield* anonymous.lastStatus).toBe(401)
        expect(refused).toMatchObject({ _tag: "InvalidCredentials" })

        const unknown = yield* Effect.flip(anonymous.client.auth.me())
        expect(yield* anonymous.lastStatus).toBe(401)
        expect(unknown).toMatchObject({ _tag: "Unauthenticated" })
      }))
  })

  describe("the account policy", () => {
    it.effect("reads version 0, writes version 1, and a stale expected_version is VersionConflict (409)", () =>
      Effect.gen(function*() {
        const { client, lastStatus } = yield* signedIn()
        const first = yield* client.policies.getAccountPolicy()
        expect(yield* lastStatus).toBe(200)
        expect(first).toMatchObject({ scope: "account", version: 0, policy: DEFAULTS, updated_at: null })

        const policy = { ...DEFAULTS, force_push: "deny" as const }
        const saved = yield* client.policies.replaceAccountPolicy({ payload: { policy, expected_version: 0 } })
        expect(yield* lastStatus).toBe(200)
        expect(saved).toMatchObject({ version: 1, policy })

        const stale = yield* Effect.flip(
          client.policies.replaceAccountPolicy({ payload: { policy: DEFAULTS, expected_version: 0 } })
        )
        expect(yield* lastStatus).toBe(409)
        expect(stale).toMatchObject({ _tag: "VersionConflict", current_version: 1 })
        expect((yield* client.policies.getAccountPolicy()).policy).toEqual(policy)

        const invalid = yield* Effect.flip(client.policies.replaceAccountPolicy({
          payload: { policy: { ...DEFAULTS, delivery_mode: "pull_request" }, expected_version: 1 }
        }))
        expect(yield* lastStatus).toBe(422)
        expect(invalid).toMatchObject({ _tag: "ValidationFailed", errors: [{ pointer: "#/policy/delivery_mode" }] })
      }))
  })

  describe("the wallet", () => {
    it.effect("reads, sets the budget (replayed on retry), adds credit as an admin, and lists the ledger", () =>
      Effect.gen(function*() {
        const { client, lastStatus } = yield* signedIn({ admin: true })
        const empty = yield* client.wallets.getWallet()
        expect(yield* lastStatus).toBe(200)
        expect(empty.version).toBe(0)
        expect(Money.format(empty.budget_usd)).toBe("0.000000")

        const key = randomUUID()
        const payload = { budget_usd: Money.decimal("25.5"), idempotency_key: key, expected_version: 0 }
        const [budgeted, response] = yield* client.wallets.setBudget({ payload, withResponse: true })
        expect(response.status).toBe(200)
        expect(response.headers["idempotent-replayed"]).toBeUndefined()
        expect(Money.format(budgeted.budget_usd)).toBe("25.500000")
        expect(budgeted.version).toBe(1)
        const [replayed, again] = yield* client.wallets.setBudget({ payload, withResponse: true })
        expect(again.headers["idempotent-replayed"]).toBe("true")
        expect(replayed).toEqual(budgeted)

        const reused = yield* Effect.flip(client.wallets.setBudget({
          payload: { budget_usd: Money.decimal("30"), idempotency_key: key, expected_version: 1 }
        }))
        expect(yield* lastStatus).toBe(422)
        expect(reused).toMatchObject({ _tag: "IdempotencyKeyReused" })

        const stale = yield* Effect.flip(client.wallets.setBudget({
          payload: { budget_usd: Money.decimal("30"), idempotency_key: randomUUID(), expected_version: 0 }
        }))
        expect(yield* lastStatus).toBe(409)
        expect(stale).toMatchObject({ _tag: "VersionConflict", current_version: 1 })

        const credited = yield* client.wallets.addCredit({
          payload: { amount_usd: Money.decimal("4.5"), idempotency_key: randomUUID(), note: "top-up" }
        })
        expect(yield* lastStatus).toBe(200)
        expect(Money.format(credited.budget_usd)).toBe("30.000000")
        expect(Money.format(credited.available_usd)).toBe("30.000000")

        const page = yield* client.wallets.listLedger({ urlParams: { limit: 1 } })
        expect(yield* lastStatus).toBe(200)
        expect(page.entries).toHaveLength(1)
        expect(page.entries[0]).toMatchObject({ kind: "credit_added", sequence: 2, note: "top-up" })
        expect(page.next_before).toBe(page.entries[0]?.id)
        const older = yield* client.wallets.listLedger({ urlParams: { limit: 5, before: page.next_before ?? "" } })
        expect(older.entries.map((entry) => entry.kind)).toEqual(["budget_set"])
        expect(older.next_before).toBeNull()

        const missing = yield* Effect.flip(
          client.wallets.listLedger({ urlParams: { before: "0190a5d2-0000-7000-8000-000000000000" } })
        )
        expect(yield* lastStatus).toBe(404)
        expect(missing).toMatchObject({ _tag: "LedgerEntryNotFound" })
      }))

    it.effect("credit from a non-administrator is Forbidden (403) and leaves the wallet as it was", () =>
      Effect.gen(function*() {
        const { client, lastStatus } = yield* signedIn()
        const forbidden = yield* Effect.flip(client.wallets.addCredit({
          payload: { amount_usd: Money.decimal("1"), idempotency_key: randomUUID() }
        }))
        expect(yield* lastStatus).toBe(403)
        expect(forbidden).toMatchObject({ _tag: "Forbidden" })
        expect((yield* client.wallets.getWallet()).version).toBe(0)
      }))
  })
})
