import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { AccountApiClient, type AccountEvent } from "../packages/client/src/index.js"
import { AppConfig } from "../src/Config.js"
import { baseUrl } from "./support/browser.js"
import { ConsoleTestApp, organisation } from "./support/console.js"
import { plainRunner } from "./support/spendControls.js"
import { call } from "./support/TestApp.js"

/**
 * The server side of the console's live overview (D17's change notices, D20): a stream opened
 * with `notices=wallet` is told when the account's wallet was written, a reserve sent through
 * plain BullMQ included (which writes no event), a burst of writes as a few notices, not one
 * each; nothing is stored in the log, and a stream that did not ask hears no notice.
 */

const waitUntil = (what: string, check: () => boolean, ms = 10_000) =>
  Effect.promise(async () => {
    const until = performance.now() + ms
    while (!check()) {
      if (performance.now() > until) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })

/** The client package's stream, with change notices, counted; the events it yields kept. */
const follow = (base: string, token: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const stop = new AbortController()
      const seen = { notices: 0, events: [] as Array<AccountEvent> }
      const client = new AccountApiClient({ baseUrl: base, token, retry: { attempts: 1 } })
      void (async () => {
        for await (
          const event of client.streamEvents({ signal: stop.signal, onWalletChanged: () => seen.notices++ })
        ) seen.events.push(event)
      })().catch(() => {})
      return { seen, stop }
    }),
    ({ stop }) => Effect.sync(() => stop.abort())
  )

/** The raw bytes of a stream opened without `notices`. */
const rawStream = (base: string, token: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const stop = new AbortController()
      const received = { text: "" }
      void (async () => {
        const response = await fetch(`${base}/developer/account/events/stream`, {
          headers: { authorization: `Bearer ${token}` },
          signal: stop.signal
        })
        const decoder = new TextDecoder()
        if (response.body === null) return
        for await (const chunk of response.body) received.text += decoder.decode(chunk, { stream: true })
      })().catch(() => {})
      return { received, stop }
    }),
    ({ stop }) => Effect.sync(() => stop.abort())
  )

describe("change notices on the live stream (D17, D20)", () => {
  layer(ConsoleTestApp(), { excludeTestServices: true, timeout: "120 seconds" })("the API and its worker", (it) => {
    it.scoped("a reserve through plain BullMQ, which writes no event, is told to a stream that asked", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const org = yield* organisation
        const config = yield* AppConfig
        const budget = yield* call("PUT", "/developer/account/wallet", {
          token: org.admin.token,
          body: { budget_usd: "20", idempotency_key: "notice-budget" }
        })
        expect(budget.status).toBe(200)
        const { seen } = yield* follow(base, org.member.token)
        const { received } = yield* rawStream(base, org.member.token)
        yield* waitUntil("both streams open", () => received.text.includes(": connected"))
        // Opened after the budget: nothing to tell yet.
        yield* Effect.sleep("600 millis")
        expect(seen.notices).toBe(0)

        const { send } = yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
        const answer = yield* send("reserve", {
          account_id: org.organisationId,
          session_id: "notice-run-1",
          amount_usd: "2",
          idempotency_key: "notice-run-1-reserve"
        })
        expect(answer.result).toMatchObject({ status: "applied" })
        yield* waitUntil("a change notice after the reserve", () => seen.notices >= 1)
        expect(seen.events).toEqual([])

        // A credit writes an event and the wallet: both reach the stream that asked; the other gets the event alone.
        const credit = yield* call("POST", "/developer/account/wallet/credits", {
          token: org.admin.token,
          body: { amount_usd: "1", idempotency_key: "notice-credit" }
        })
        expect(credit.status).toBe(200)
        yield* waitUntil("the credit's event", () => seen.events.length === 1 && received.text.includes("id: "))
        yield* waitUntil("the credit's notice", () => seen.notices >= 2)
        yield* Effect.sleep("600 millis")
        expect(received.text).not.toContain("wallet.changed")

        // Nothing of the notices is in the log: the one event is the credit's.
        const log = yield* call("GET", "/developer/account/events?order=newest&limit=500", { token: org.member.token })
        const types = (log.body as { events: ReadonlyArray<{ type: string }> }).events.map((event) => event.type)
        expect(types).not.toContain("wallet.changed")
        expect(types).toContain(seen.events[0]?.type)
      }))

    it.scoped("a burst of wallet writes is a few notices, not one each", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const org = yield* organisation
        const { seen } = yield* follow(base, org.member.token)
        yield* Effect.sleep("500 millis")
        const credits = 20
        for (let n = 0; n < credits; n++) {
          const credit = yield* call("POST", "/developer/account/wallet/credits", {
            token: org.admin.token,
            body: { amount_usd: "1", idempotency_key: `burst-${n}` }
          })
          expect(credit.status).toBe(200)
        }
        yield* waitUntil("every credit's event", () => seen.events.length === credits)
        yield* Effect.sleep("600 millis")
        console.log(`${credits} credits in a row: ${seen.notices} change notices`)
        expect(seen.notices).toBeGreaterThanOrEqual(1)
        expect(seen.notices).toBeLessThan(credits)
      }))

    it.scoped("notices takes only wallet: anything else is 422 at #/query/notices", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const reply = yield* call("GET", "/developer/account/events/stream?notices=everything", {
          token: org.member.token
        })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({ errors: [{ pointer: "#/query/notices" }] })
      }))
    it.scoped("a session whose only reserve was refused is not open: the open list agrees with a concurrency limit (D12, D19)", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const config = yield* AppConfig
        expect(
          (yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "1", idempotency_key: "refused-budget" }
          })).status
        ).toBe(200)
        expect(
          (yield* call("PUT", "/developer/account/limits", {
            token: org.admin.token,
            body: { expected_version: 0, limits: [{ scope: "account", period: "concurrent", max_open_sessions: 5 }] }
          })).status
        ).toBe(200)
        const { send } = yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
        const refused = yield* send("reserve", {
          account_id: org.organisationId,
          session_id: "refused-1",
          amount_usd: "5",
          idempotency_key: "refused-1-reserve"
        })
        expect(refused.result).toMatchObject({ status: "insufficient_funds" })
        const funded = yield* send("reserve", {
          account_id: org.organisationId,
          session_id: "funded-1",
          amount_usd: "0.5",
          idempotency_key: "funded-1-reserve"
        })
        expect(funded.result).toMatchObject({ status: "applied" })

        type Listed = { session_id: string; state: string; funded: boolean }
        const open = yield* call("GET", "/developer/account/wallet/sessions?state=open", { token: org.member.token })
        const openIds = (open.body as { sessions: ReadonlyArray<Listed> }).sessions.map((one) => one.session_id)
        expect(openIds).toEqual(["funded-1"])
        const limits = yield* call("GET", "/developer/account/limits", { token: org.member.token })
        const concurrent = (limits.body as { limits: ReadonlyArray<{ open_sessions: number | null }> }).limits[0]
        expect(concurrent?.open_sessions).toBe(openIds.length)

        const all = yield* call("GET", "/developer/account/wallet/sessions?state=all", { token: org.member.token })
        const byId = new Map(
          (all.body as { sessions: ReadonlyArray<Listed> }).sessions.map((one) => [one.session_id, one])
        )
        expect(byId.get("refused-1")).toMatchObject({ state: "open", funded: false, reserved_usd: "0.000000" })
        expect(byId.get("funded-1")).toMatchObject({ state: "open", funded: true })

        // The runner's clean-up closes it at once; it stays one that was never funded.
        const released = yield* send("release", {
          account_id: org.organisationId,
          session_id: "refused-1",
          idempotency_key: "refused-1-release"
        })
        expect(released.result).toMatchObject({ status: "nothing_to_release" })
        const one = yield* call("GET", "/developer/account/wallet/sessions/refused-1", { token: org.member.token })
        expect(one.body).toMatchObject({ state: "closed", funded: false })
        const fundedOne = yield* call("GET", "/developer/account/wallet/sessions/funded-1", { token: org.member.token })
        expect(fundedOne.body).toMatchObject({ state: "open", funded: true })
      }))
  })
})
