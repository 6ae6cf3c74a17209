import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { LedgerPage, Wallet, WalletRead } from "../src/Domain/Wallet.js"
import { Settlement } from "../src/Settlement.js"
import { SettlementMetrics } from "../src/Settlement/Metrics.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { SettlementWorkerLive } from "../src/Settlement/Worker.js"
import { WalletLedger } from "../src/Wallets/Ledger.js"
import { signedInUser, TestApp } from "./support/TestApp.js"

/**
 * The wallet's and the ledger page's JSON is written by PostgreSQL, not by the
 * contract's schemas (a measured trade, see docs/architecture.md). This holds it to them: every such answer, as the client receives it,
 * decodes with the contract's schema and encodes back to the same bytes. The
 * wallet a settlement job returns is held to the same schema.
 */

const TestLayer = SettlementWorkerLive.pipe(
  Layer.provideMerge(
    Layer.mergeAll(SettlementProducer.Default, SettlementQueue.Default, Settlement.Default, SettlementMetrics.Default)
  ),
  Layer.provideMerge(WalletLedger.Default),
  Layer.provideMerge(TestApp())
)

/** The body exactly as the service sent it. */
const rawBody = (path: string, token: string) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(HttpClientRequest.get(path).pipe(HttpClientRequest.bearerToken(token)))
    expect(response.status).toBe(200)
    return yield* response.text
  }).pipe(Effect.scoped, Effect.orDie)

/** Decodes `json` with `schema` and encodes it back: the same text, or the test fails naming both. */
const roundTrips = <A, I>(schema: Schema.Schema<A, I>, json: string) =>
  Effect.gen(function*() {
    const decoded = yield* Schema.decodeUnknown(Schema.parseJson(schema))(json)
    expect(yield* Schema.encode(Schema.parseJson(schema))(decoded)).toBe(json)
    return decoded
  }).pipe(Effect.orDie)

const WALLET = "/developer/account/wallet"
const ledgerPath = (limit: number, before: string | null) =>
  `${WALLET}/ledger?limit=${limit}${before === null ? "" : `&before=${before}`}`

/** Every page of the ledger through the API, newest first, each round-tripped; returns how many entries. */
const everyPage = (token: string, limit: number) =>
  Effect.gen(function*() {
    let before: string | null = null
    let entries = 0
    let pages = 0
    for (;;) {
      const page: LedgerPage = yield* roundTrips(LedgerPage, yield* rawBody(ledgerPath(limit, before), token))
      entries += page.entries.length
      pages++
      if (page.next_before === null) return { entries, pages }
      before = page.next_before
    }
  })

const accountOf = (user: { readonly id: string }): Account => ({ kind: "user", id: user.id })

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })("JSON written by PostgreSQL (D7)", (it) => {
  describe("the wallet read", () => {
    it.effect("decodes with WalletRead and encodes back byte for byte, however the wallet stands", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const ledgers = yield* WalletLedger
        // The first read creates the wallet; the second is PostgreSQL's text.
        yield* roundTrips(WalletRead, yield* rawBody(WALLET, user.token))
        const fresh = yield* roundTrips(WalletRead, yield* rawBody(WALLET, user.token))
        expect(fresh.version).toBe(0)
        // Fractional and the largest amounts, an over-spend's negative available, enforcement.
        yield* ledgers.withLock(accountOf(user), (ledger) =>
          ledger.moveAll([
            { kind: "budget_set", budget_usd: Money.decimal("10.000001") },
            { kind: "reserve", amount_usd: Money.decimal("3.25"), session_id: "s-1", task_id: null },
            {
              kind: "spend",
              amount_usd: Money.decimal("20.5"),
              from_reserved_usd: Money.decimal("3.25"),
              session_id: "s-1",
              task_id: null
            }
          ]))
        const overSpent = yield* roundTrips(WalletRead, yield* rawBody(WALLET, user.token))
        expect(Money.format(overSpent.available_usd)).toBe("-10.499999")
        yield* ledgers.withLock(accountOf(user), (ledger) => ledger.move({ kind: "budget_set", budget_usd: Money.max }))
        const largest = yield* roundTrips(WalletRead, yield* rawBody(WALLET, user.token))
        expect(Money.format(largest.budget_usd)).toBe("999999999999.999999")
      }))
  })

  describe("the ledger's pages", () => {
    /** About 1,500 page reads, 1,203 of them one entry each: a minute and more on a loaded machine. */
    const PAGING_BOUND_MS = 180_000

    it.effect(
      "empty, first and deep pages decode with LedgerPage and encode back byte for byte",
      () =>
        Effect.gen(function*() {
          const user = yield* signedInUser()
          const ledgers = yield* WalletLedger
          // Before any entry (and before the wallet exists): the empty page.
          expect(yield* rawBody(ledgerPath(100, null), user.token)).toBe("{\"entries\":[],\"next_before\":null}")
          yield* roundTrips(LedgerPage, yield* rawBody(ledgerPath(100, null), user.token))
          // 1,203 entries of every shape: signed, fractional and large amounts, notes that need
          // escaping, settlement movements with their session and task.
          const shapes = [
            { kind: "budget_set", budget_usd: Money.decimal("12.5"), note: "first, \"quoted\" \\ back\tslash\u0001/" },
            { kind: "credit_added", amount_usd: Money.decimal("0.000001"), note: "ünïcödé ✓ 𝄞" },
            { kind: "reserve", amount_usd: Money.decimal("0.25"), session_id: "s-\"1\"", task_id: "t-1" },
            {
              kind: "spend",
              amount_usd: Money.decimal("0.5"),
              from_reserved_usd: Money.decimal("0.25"),
              session_id: "s-\"1\"",
              task_id: "t-1"
            }
          ] as const
          for (let round = 0; round < 3; round++) {
            yield* ledgers.withLock(
              accountOf(user),
              (ledger) => ledger.moveAll(Array.from({ length: 401 }, (_, i) => shapes[i % shapes.length] ?? shapes[0]))
            )
          }
          for (const limit of [1, 100, 500]) {
            const { entries, pages } = yield* everyPage(user.token, limit)
            expect(entries).toBe(1_203)
            expect(pages).toBe(Math.ceil(1_203 / limit))
          }
        }),
      PAGING_BOUND_MS
    )
  })

  describe("the wallet in a settlement result", () => {
    it.effect("decodes with Wallet and encodes back to the same JSON", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const producer = yield* SettlementProducer
        const account = accountOf(user)
        const jobs = [
          producer.enqueueReserve({
            account_id: account.id,
            session_id: "s-1",
            amount_usd: "2.5",
            idempotency_key: randomUUID()
          }),
          producer.enqueueSpend({
            account_id: account.id,
            session_id: "s-1",
            amount_usd: "7.000001",
            idempotency_key: randomUUID()
          }),
          producer.enqueueRelease({ account_id: account.id, session_id: "s-1", idempotency_key: randomUUID() })
        ]
        for (const enqueue of jobs) {
          const result = yield* Effect.flatMap(enqueue, (job) => job.result())
          const json = JSON.stringify(result.wallet)
          const wallet = yield* roundTrips(Wallet, json)
          // The same wallet the API then reads, as PostgreSQL writes it.
          expect(wallet.id).toBe((yield* roundTrips(WalletRead, yield* rawBody(WALLET, user.token))).id)
        }
        const final = yield* roundTrips(WalletRead, yield* rawBody(WALLET, user.token))
        expect(Money.format(final.spent_usd)).toBe("7.000001")
      }))
  })
})
