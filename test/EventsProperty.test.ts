import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Runtime } from "effect"
import fc from "fast-check"
import { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { Settlement } from "../src/Settlement.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import {
  type EntryBody,
  getLedger,
  getWallet,
  newKey,
  pageOf,
  postCredit,
  putBudget,
  walletOf
} from "./support/Wallets.js"

/**
 * D17's balance events, held to the ledger: random budgets, credits, and settlement's holds,
 * spends (beyond their holds too) and releases against random thresholds, then the event log is
 * compared with the crossings the ledger's after-balances show, computed here from the entries
 * alone. Settlement's jobs go through the settlement service, each its own batch, as the worker
 * applies them.
 */

type Command =
  | { readonly kind: "budget"; readonly cents: number }
  | { readonly kind: "credit"; readonly cents: number }
  | { readonly kind: "hold"; readonly cents: number }
  | { readonly kind: "spend"; readonly cents: number }
  | { readonly kind: "release" }

/** Whole multiples of $10 mostly, so that balances land exactly on thresholds often (the boundary is the rule). */
const cents = (min: number, max: number) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: Math.ceil(min / 1000), max: max / 1000 }).map((tens) => tens * 1000) },
    { weight: 1, arbitrary: fc.integer({ min, max }) }
  )

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant("budget" as const), cents: cents(0, 20_000) }),
  fc.record({ kind: fc.constant("credit" as const), cents: cents(1, 10_000) }),
  fc.record({ kind: fc.constant("hold" as const), cents: cents(1, 15_000) }),
  fc.record({ kind: fc.constant("spend" as const), cents: cents(1, 15_000) }),
  fc.constant({ kind: "release" as const })
)

type ThresholdBody = { readonly amount_usd: string } | { readonly percent_of_budget: number }

const threshold: fc.Arbitrary<ThresholdBody> = fc.oneof(
  cents(1, 15_000).map((amount) => ({ amount_usd: (amount / 100).toFixed(2) })),
  fc.oneof(fc.constantFrom(10, 20, 25, 50, 100), fc.integer({ min: 1, max: 100 })).map((percent) => ({
    percent_of_budget: percent
  }))
)

const usd = (cents: number) => (cents / 100).toFixed(2)

interface Expected {
  readonly type: string
  readonly threshold_usd?: string
  readonly available_usd: string
}

/** The events the ledger's entries call for, from the entries and the thresholds alone. */
const expectedFrom = (entries: ReadonlyArray<EntryBody>, thresholds: ReadonlyArray<ThresholdBody>) => {
  const expected: Array<Expected> = []
  let before = { enforced: false, budget: Money.zero, available: Money.zero }
  for (const entry of entries) {
    const decision = entry.kind === "budget_set" || entry.kind === "credit_added"
    const after = {
      enforced: before.enforced || decision,
      budget: Money.decimal(entry.budget_after_usd),
      available: Money.decimal(entry.available_after_usd)
    }
    // Every movement is judged, a budget decision or settlement's: its own event first, then its crossings.
    const available_usd = entry.available_after_usd
    if (decision) expected.push({ type: `wallet.${entry.kind}`, available_usd })
    for (const t of thresholds) {
      const dollars = (state: typeof before) =>
        "amount_usd" in t ? Money.decimal(t.amount_usd) : state.budget.times(t.percent_of_budget).dividedBy(100)
      const low = (state: typeof before) => state.enforced && state.available.lt(dollars(state))
      if (low(before) !== low(after)) {
        expected.push({
          type: low(after) ? "wallet.balance_low" : "wallet.balance_recovered",
          threshold_usd: Money.format(dollars(after)),
          available_usd
        })
      }
    }
    const depleted = (state: typeof before) => state.enforced && state.available.lte(0)
    if (!depleted(before) && depleted(after)) expected.push({ type: "wallet.depleted", available_usd })
    before = after
  }
  return expected
}

interface EventBody {
  readonly type: string
  readonly data: { readonly threshold_usd?: string; readonly wallet: { readonly available_usd: string } }
}

const run = (thresholds: ReadonlyArray<ThresholdBody>, commands: ReadonlyArray<Command>) =>
  Effect.gen(function*() {
    const user = yield* signedInUser({ admin: true })
    const account = new Account({ kind: "user", id: user.id })
    const settlement = yield* Settlement
    const settle = (job: SettlementJob) => Effect.either(settlement.apply(job))
    const payload = (session_id: string) => ({ account_id: account.id, session_id, idempotency_key: newKey() })
    const saved = yield* call("PUT", "/developer/account/alerts", { token: user.token, body: { thresholds } })
    expect(saved.status).toBe(200)
    // Sessions opened, oldest first: a spend goes to the newest, a release closes the oldest.
    const sessions: Array<string> = []
    for (const step of commands) {
      if (step.kind === "budget") {
        const { version } = walletOf(yield* getWallet(user.token))
        // Below what is held is 409 and writes nothing: the ledger, and so the oracle, never sees it.
        yield* putBudget(user.token, {
          budget_usd: usd(step.cents),
          expected_version: version,
          idempotency_key: newKey()
        })
      } else if (step.kind === "credit") {
        expect((yield* postCredit(user.token, { amount_usd: usd(step.cents), idempotency_key: newKey() })).status)
          .toBe(200)
      } else if (step.kind === "hold") {
        const session = `s-${newKey()}`
        // Refused for want of funds or not, the session is known from now on (D12).
        yield* settle({ kind: "reserve", payload: { ...payload(session), amount_usd: usd(step.cents) } })
        sessions.push(session)
      } else if (step.kind === "spend") {
        const session = sessions.at(-1)
        if (session !== undefined) {
          yield* settle({ kind: "spend", payload: { ...payload(session), amount_usd: usd(step.cents) } })
        }
      } else {
        const session = sessions.shift()
        if (session !== undefined) yield* settle({ kind: "release", payload: payload(session) })
      }
    }
    const entries = [...pageOf(yield* getLedger(user.token, "limit=500")).entries].reverse()
    const log = (yield* call("GET", "/developer/account/events?limit=500", { token: user.token })).body as {
      events: ReadonlyArray<EventBody>
    }
    // Session events are settlement's own (test/SettlementEvents.test.ts); the balance events are compared here.
    const actual = log.events.filter((event) => event.type.startsWith("wallet.")).map((event): Expected => ({
      type: event.type,
      ...(event.data.threshold_usd === undefined ? {} : { threshold_usd: event.data.threshold_usd }),
      available_usd: event.data.wallet.available_usd
    }))
    expect(actual).toEqual(expectedFrom(entries, thresholds))
  })

const TestLayer = Settlement.Default.pipe(Layer.provideMerge(TestApp()))

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })("balance events (D17)", (it) => {
  describe("random budgets, credits, and settlement's holds, spends and releases against random thresholds", () => {
    it.effect(
      "the log holds exactly the crossings the ledger's after-balances show, once each",
      () =>
        Effect.gen(function*() {
          const runtime = yield* Effect.runtime<Effect.Effect.Context<ReturnType<typeof run>>>()
          yield* Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(
                fc.array(threshold, { minLength: 0, maxLength: 4 }),
                fc.array(command, { minLength: 1, maxLength: 12 }),
                (thresholds, commands) => Runtime.runPromise(runtime)(run(thresholds, commands))
              ),
              { numRuns: 100 }
            )
          )
        }),
      120_000
    )
  })
})
