import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import { Account } from "../src/Domain/Account.js"
import { serveOn } from "../src/Http.js"
import { Settlement } from "../src/Settlement.js"
import { plainRunner, saveLimits } from "./support/spendControls.js"
import { call, signedInUser } from "./support/TestApp.js"
import { TestSettlement } from "./support/TestSettlement.js"
import { getLedger, newKey, pageOf, putBudget } from "./support/Wallets.js"

/**
 * D17 (docs/decisions/D17-events-and-webhooks.md), the events settlement causes, as a runner
 * causes them through plain BullMQ and a member reads them back over HTTP: balance crossings of
 * reserves, spends, releases and expiry, `session.closed`, `session.cap_reached` and
 * `limit.reached`, each once, and none from a batch that rolled back.
 */

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(Layer.provideMerge(TestSettlement()))

const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

interface EventBody {
  readonly id: string
  readonly type: string
  readonly data: Record<string, unknown> & {
    readonly wallet?: { readonly available_usd: string }
    readonly threshold_usd?: string
    readonly session?: Record<string, unknown>
  }
}

const eventsOf = (token: string) =>
  Effect.map(
    call("GET", "/developer/account/events?limit=500", { token }),
    (reply) => (reply.body as { events: ReadonlyArray<EventBody> }).events
  )

/** The events settlement wrote: those after the budget decisions the test made over HTTP. */
const settlementEventsOf = (token: string) =>
  Effect.map(
    eventsOf(token),
    (events) => events.filter((event) => event.type !== "wallet.budget_set" && event.type !== "wallet.credit_added")
  )

/** An administrator of their own account with a budget (enforced) and alert thresholds saved. */
const funded = (budget: string, thresholds: ReadonlyArray<Record<string, unknown>> = []) =>
  Effect.gen(function*() {
    const admin = yield* signedInUser({ admin: true })
    expect((yield* putBudget(admin.token, { budget_usd: budget, idempotency_key: newKey() })).status).toBe(200)
    if (thresholds.length > 0) {
      expect((yield* call("PUT", "/developer/account/alerts", { token: admin.token, body: { thresholds } })).status)
        .toBe(200)
    }
    return { token: admin.token, account: new Account({ kind: "user", id: admin.id }) }
  })

const summary = (event: EventBody) => ({
  type: event.type,
  ...(event.data.threshold_usd === undefined ? {} : { threshold_usd: event.data.threshold_usd }),
  ...(event.data.wallet === undefined ? {} : { available_usd: event.data.wallet.available_usd }),
  ...(event.data.session === undefined ? {} : {
    session_id: event.data.session["session_id"],
    closed_reason: event.data.session["closed_reason"]
  })
})

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "90 seconds" })("settlement's events (D17)", (it) => {
  describe("balance crossings and closed sessions", () => {
    it.scoped("reserves, spends and releases write each crossing once, and each close", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { account, token } = yield* funded("100", [{ amount_usd: "50" }])
        const job = (kind: string, session_id: string, amount?: string) =>
          send(kind, {
            account_id: account.id,
            session_id,
            idempotency_key: randomUUID(),
            ...(amount === undefined ? {} : { amount_usd: amount })
          })
        expect((yield* job("reserve", "s-1", "60")).result).toMatchObject({ status: "applied" })
        expect((yield* job("reserve", "s-1", "10")).result).toMatchObject({ status: "applied" })
        expect((yield* job("release", "s-1")).result).toMatchObject({ status: "applied" })
        expect((yield* job("reserve", "s-2", "100")).result).toMatchObject({ status: "applied" })
        expect((yield* job("spend", "s-2", "30")).result).toMatchObject({ status: "applied" })
        expect((yield* job("release", "s-2")).result).toMatchObject({ status: "applied" })
        // A session with nothing held closes all the same (D12); a second release closes nothing.
        expect((yield* job("reserve", "s-3", "5")).result).toMatchObject({ status: "applied" })
        expect((yield* job("spend", "s-3", "5")).result).toMatchObject({ status: "applied" })
        expect((yield* job("release", "s-3")).result).toMatchObject({ status: "nothing_to_release" })
        expect((yield* job("release", "s-3")).result).toMatchObject({ status: "nothing_to_release" })
        const events = yield* settlementEventsOf(token)
        expect(events.map(summary)).toEqual([
          { type: "wallet.balance_low", threshold_usd: "50.000000", available_usd: "40.000000" },
          { type: "wallet.balance_recovered", threshold_usd: "50.000000", available_usd: "100.000000" },
          { type: "session.closed", session_id: "s-1", closed_reason: "released" },
          { type: "wallet.balance_low", threshold_usd: "50.000000", available_usd: "0.000000" },
          { type: "wallet.depleted", available_usd: "0.000000" },
          { type: "wallet.balance_recovered", threshold_usd: "50.000000", available_usd: "70.000000" },
          { type: "session.closed", session_id: "s-2", closed_reason: "released" },
          { type: "session.closed", session_id: "s-3", closed_reason: "released" }
        ])
        // The session as D12 shows it: the same object the sessions view answers, but for the
        // view's `funded` (D12's amendment on refused sessions), which events do not carry.
        const closed = events.find((event) =>
          event.type === "session.closed" && event.data.session?.["session_id"] === "s-2"
        )
        const view = yield* call("GET", "/developer/account/wallet/sessions/s-2", { token })
        const { entries: _entries, entries_truncated: _truncated, funded: viewFunded, ...session } = view
          .body as Record<
            string,
            unknown
          >
        expect(viewFunded).toBe(true)
        expect(closed?.data.session).toEqual(session)
        expect(session).toMatchObject({ state: "closed", spent_usd: "30.000000", reserved_usd: "0.000000" })
      }))

    it.scoped("the hold-expiry sweep writes the crossing and the session closed as expired", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { account, token } = yield* funded("10", [{ percent_of_budget: 50 }])
        expect(
          (yield* send("reserve", {
            account_id: account.id,
            session_id: "lapsing",
            amount_usd: "8",
            idempotency_key: randomUUID()
          })).result
        ).toMatchObject({ status: "applied" })
        const sql = yield* SqlClient.SqlClient
        yield* Effect.orDie(
          sql`UPDATE settlement_sessions SET expires_at = now() - interval '1 second' WHERE session_id = 'lapsing'`
        )
        const settlement = yield* Settlement
        expect(yield* settlement.expireHolds()).toBeGreaterThanOrEqual(1)
        // A second sweep finds nothing more to close.
        yield* settlement.expireHolds()
        expect((yield* settlementEventsOf(token)).map(summary)).toEqual([
          { type: "wallet.balance_low", threshold_usd: "5.000000", available_usd: "2.000000" },
          { type: "wallet.balance_recovered", threshold_usd: "5.000000", available_usd: "10.000000" },
          { type: "session.closed", session_id: "lapsing", closed_reason: "expired" }
        ])
      }))

    it.scoped("a batch that rolls back leaves no event; the same job applied later writes its events once", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { account, token } = yield* funded("10", [{ amount_usd: "5" }])
        const sql = yield* SqlClient.SqlClient
        // A function's body takes no parameters: the id (a UUID the service made) is written into it.
        // The log refuses this account's events for a while: the batch fails after its movement and its events were written.
        yield* Effect.orDie(sql`
          CREATE FUNCTION test_refuse_events() RETURNS trigger AS $$
          BEGIN
            IF NEW.account_id = ${
          sql.literal(`'${account.id}'`)
        }::uuid THEN RAISE EXCEPTION 'refused by the test'; END IF;
            RETURN NEW;
          END $$ LANGUAGE plpgsql`)
        yield* Effect.orDie(sql`
          CREATE TRIGGER test_refuse_events BEFORE INSERT ON account_events
          FOR EACH ROW EXECUTE FUNCTION test_refuse_events()`)
        const reserve = { account_id: account.id, session_id: "doomed", amount_usd: "8", idempotency_key: "k-1" }
        expect((yield* send("reserve", reserve)).failed).toBeDefined()
        expect(yield* settlementEventsOf(token)).toEqual([])
        // Nothing moved: the ledger holds the budget decision alone.
        expect(pageOf(yield* getLedger(token)).entries.map((entry) => entry.kind)).toEqual(["budget_set"])
        yield* Effect.orDie(sql`DROP TRIGGER test_refuse_events ON account_events`)
        expect((yield* send("reserve", reserve)).result).toMatchObject({ status: "applied" })
        expect((yield* send("reserve", reserve)).result).toMatchObject({ status: "duplicate" })
        expect((yield* settlementEventsOf(token)).map(summary)).toEqual([
          { type: "wallet.balance_low", threshold_usd: "5.000000", available_usd: "2.000000" }
        ])
      }))
  })

  describe("caps and limits", () => {
    it.scoped("session.cap_reached is written once, by the first spend answering cap_reached", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        const { account, token } = yield* funded("100")
        const base = { account_id: account.id, session_id: "capped" }
        expect(
          (yield* send("reserve", { ...base, amount_usd: "5", max_usd: "10", idempotency_key: randomUUID() })).result
        )
          .toMatchObject({ status: "applied" })
        const spend = (amount: string) => send("spend", { ...base, amount_usd: amount, idempotency_key: randomUUID() })
        expect((yield* spend("4")).result).not.toHaveProperty("cap_reached")
        expect((yield* spend("6")).result).toMatchObject({ status: "applied", cap_reached: true })
        expect((yield* spend("1")).result).toMatchObject({ status: "applied", cap_reached: true })
        const capped = (yield* settlementEventsOf(token)).filter((event) => event.type === "session.cap_reached")
        expect(capped).toHaveLength(1)
        expect(capped[0]?.data).toMatchObject({
          max_usd: "10.000000",
          session: { session_id: "capped", state: "open", spent_usd: "10.000000" }
        })
      }))

    it.scoped("limit.reached is written once per limit and period: by the reserve it refuses, or the spend that takes it to its amount", () =>
      Effect.gen(function*() {
        const { send } = yield* runner
        // Refused reserves: the first refusal announces the limit, later ones do not.
        const refused = yield* funded("100")
        const [daily] = yield* saveLimits(refused.account, [
          { scope: "account", scope_id: null, period: "day", amount_usd: "10" }
        ])
        const reserve = (session_id: string, amount: string, max_usd?: string) =>
          send("reserve", {
            account_id: refused.account.id,
            session_id,
            amount_usd: amount,
            idempotency_key: randomUUID(),
            ...(max_usd === undefined ? {} : { max_usd })
          })
        expect((yield* reserve("a", "6")).result).toMatchObject({ status: "applied" })
        // A session's own cap is not a limit: no limit.reached for it.
        expect((yield* reserve("b", "3", "2")).result).toMatchObject({ status: "limit_reached", limit: { id: null } })
        expect((yield* reserve("c", "6")).result).toMatchObject({ status: "limit_reached", limit: { id: daily?.id } })
        expect((yield* reserve("d", "5")).result).toMatchObject({ status: "limit_reached" })
        const first = (yield* settlementEventsOf(refused.token)).filter((event) => event.type === "limit.reached")
        expect(first.map((event) => event.data)).toEqual([{
          limit: {
            id: daily?.id,
            scope: "account",
            scope_id: null,
            period: "day",
            amount_usd: "10.000000",
            used_usd: "6.000000"
          }
        }])
        // Spends beyond their hold take the limit to its amount: announced once.
        const spent = yield* funded("100")
        const [weekly] = yield* saveLimits(spent.account, [
          { scope: "account", scope_id: null, period: "week", amount_usd: "10" }
        ])
        const base = { account_id: spent.account.id, session_id: "over" }
        expect((yield* send("reserve", { ...base, amount_usd: "5", idempotency_key: randomUUID() })).result)
          .toMatchObject({ status: "applied" })
        for (const amount of ["4", "3", "7"]) {
          expect((yield* send("spend", { ...base, amount_usd: amount, idempotency_key: randomUUID() })).result)
            .toMatchObject({ status: "applied" })
        }
        const second = (yield* settlementEventsOf(spent.token)).filter((event) => event.type === "limit.reached")
        expect(second.map((event) => event.data)).toEqual([{
          limit: {
            id: weekly?.id,
            scope: "account",
            scope_id: null,
            period: "week",
            amount_usd: "10.000000",
            used_usd: "14.000000"
          }
        }])
        // And a reserve the limit now refuses announces nothing more in this period.
        expect((yield* send("reserve", { ...base, amount_usd: "1", idempotency_key: randomUUID() })).result)
          .toMatchObject({ status: "limit_reached" })
        expect((yield* settlementEventsOf(spent.token)).filter((event) => event.type === "limit.reached"))
          .toHaveLength(1)
      }))
  })
})
