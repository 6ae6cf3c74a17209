import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { DateTime, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { Books, type Mismatch } from "../src/Books.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { Settlement } from "../src/Settlement.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { Wallets } from "../src/Wallets.js"
import { ledgerVerify } from "./support/ledgerVerify.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/** `cli ledger verify` (D13) on books the settlement worker wrote, and on books damaged on purpose. */

/** A session's life through the real worker: reserve, spend within and beyond the hold, release. */
const runSession = (account: Account, session: string, spends: ReadonlyArray<string>, release = true) =>
  Effect.gen(function*() {
    const producer = yield* SettlementProducer
    const settle = <A extends { readonly result: () => Effect.Effect<unknown, unknown> }, E>(
      job: Effect.Effect<A, E>
    ) => Effect.flatMap(job, (enqueued) => enqueued.result())
    const base = { account_id: account.id, session_id: session }
    yield* settle(producer.enqueueReserve({ ...base, amount_usd: "10", idempotency_key: randomUUID() }))
    for (const amount_usd of spends) {
      yield* settle(producer.enqueueSpend({ ...base, amount_usd, idempotency_key: randomUUID() }))
    }
    if (release) yield* settle(producer.enqueueRelease({ ...base, idempotency_key: randomUUID() }))
  }).pipe(Effect.orDie)

/** An account whose books have budget writes, sessions released, one spent beyond its hold, and one still open. */
const busyAccount = Effect.gen(function*() {
  const account = yield* newAccount("100")
  yield* runSession(account, "released", ["2.5", "1"])
  yield* runSession(account, "overspent", ["7", "6.25"])
  yield* runSession(account, "open", ["0.75"], false)
  return account
})

/** Changes the ledger behind the append-only trigger's back, as only damage would. */
const tamper = (statement: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only`
      yield* statement(sql)
      yield* sql`ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only`
    }))
  }).pipe(Effect.orDie)

const walletIdOf = (account: Account) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ id: string }>`SELECT id FROM wallets WHERE account_id = ${account.id}`
  ).pipe(
    Effect.map((rows) => rows[0]?.id ?? ""),
    Effect.orDie
  )

/**
 * An account with credit grants (D21) beside its base budget: one drawn first (priority 0), one
 * that expired, one voided, sessions drawing them (one still open, so grants are earmarked).
 * Answers the account and the first grant's id.
 */
const grantedAccount = Effect.gen(function*() {
  const wallets = yield* Wallets
  const account = yield* newAccount("20")
  const credit = (amount: string, terms: { readonly priority?: number; readonly expires_at?: DateTime.Utc } = {}) =>
    Effect.map(
      wallets.addCredit(account, { amount_usd: Money.decimal(amount), idempotency_key: randomUUID(), ...terms }),
      (added) => added.grant.id
    )
  const first = yield* credit("30", { priority: 0 })
  yield* credit("8", { expires_at: DateTime.addDuration(yield* DateTime.now, "1500 millis") })
  const voided = yield* credit("5")
  yield* wallets.voidGrant(account, voided, { idempotency_key: randomUUID() })
  yield* runSession(account, "released", ["2.5", "1"])
  yield* runSession(account, "overspent", ["7", "6.25"])
  // Past its expiry, the next writer of the wallet ends the grant first, with its entry.
  yield* Effect.sleep("1600 millis")
  yield* credit("2")
  yield* runSession(account, "open", ["0.75"], false)
  return { account, grant: first }
}).pipe(Effect.orDie)

/** What the entries moved of grants, by kind: the replay below has every kind to replay. */
const grantKindsOf = (account: Account) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ kind: string }>`
      SELECT DISTINCT kind::text AS kind FROM ledger_entries
      WHERE wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id}) AND grants IS NOT NULL
      ORDER BY 1`).pipe(Effect.map((rows) => rows.map((row) => row.kind)), Effect.orDie)

const verifyAccount = (account: Account) => Effect.flatMap(Books, (books) => books.verify(Option.some(account.id)))
const driftOf = (account: Account) => Effect.flatMap(Books, (books) => books.drift(Option.some(account.id)))

const checksOf = (mismatches: ReadonlyArray<Mismatch>) =>
  mismatches.map(({ check, sequence, session_id }) => ({ check, sequence, session_id }))

const TestBooks = TestSettlement()

layer(Books.Default.pipe(Layer.provideMerge(TestBooks)), { excludeTestServices: true, timeout: "60 seconds" })(
  "ledger verify (D13)",
  (it) => {
    describe("books the service wrote", () => {
      it.effect("replay green: every entry, wallet row and session sum agrees, and the command exits 0", () =>
        Effect.gen(function*() {
          const [first, second] = [yield* busyAccount, yield* busyAccount]
          // A hold that lapsed and was released by the expiry sweep is part of the books too.
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE settlement_sessions SET expires_at = now() - interval '1 second'
          WHERE session_id = 'open' AND wallet_id = ${yield* walletIdOf(second)}`.pipe(Effect.orDie)
          expect(yield* Effect.flatMap(Settlement, (settlement) => settlement.expireHolds())).toBeGreaterThanOrEqual(1)

          // The budget, three reserves, five spends and one release (the overspent session had nothing left
          // to release); the second account's open hold was released by the sweep.
          expect(yield* verifyAccount(first)).toEqual({ wallets: 1, entries: 10, mismatches: [] })
          expect(yield* verifyAccount(second)).toEqual({ wallets: 1, entries: 11, mismatches: [] })
          // The drift check (D19) agrees: every wallet row and running total matches the entries.
          expect(yield* Effect.flatMap(Books, (books) => books.drift(Option.none()))).toEqual({
            count: 0,
            mismatches: []
          })
          const all = yield* ledgerVerify([])
          expect(all.status, all.stderr).toBe(0)
          expect(JSON.parse(all.stdout)).toMatchObject({ mismatches: [], drift: 0 })
          expect(JSON.parse(all.stdout).wallets).toBeGreaterThanOrEqual(2)
          const one = yield* ledgerVerify(["--account", first.id])
          expect(one.status, one.stderr).toBe(0)
          expect(JSON.parse(one.stdout)).toEqual({ wallets: 1, entries: expect.any(Number), mismatches: [], drift: 0 })
        }))

      it.effect("an account with no wallet is an error, not a clean bill", () =>
        Effect.gen(function*() {
          const unknown = yield* ledgerVerify(["--account", randomUUID()])
          expect(unknown.status).toBe(1)
          expect(unknown.stderr).toContain("no wallet for account")
          const malformed = yield* ledgerVerify(["--account", "not-an-id"])
          expect(malformed.status).toBe(1)
        }))
    })

    describe("books damaged on purpose", () => {
      it.effect("a wrong after-balance is found at its entry, and the command exits 1 with the mismatch", () =>
        Effect.gen(function*() {
          const account = yield* busyAccount
          const walletId = yield* walletIdOf(account)
          yield* tamper((sql) =>
            sql`UPDATE ledger_entries SET spent_after_usd = spent_after_usd + 1, available_after_usd = available_after_usd - 1
              WHERE wallet_id = ${walletId} AND sequence = 4`
          )
          const verdict = yield* verifyAccount(account)
          // The entry itself, and the one after it, which no longer follows from it.
          expect(checksOf(verdict.mismatches)).toEqual([
            { check: "entry_balances", sequence: 4, session_id: undefined },
            { check: "entry_balances", sequence: 5, session_id: undefined }
          ])
          const command = yield* ledgerVerify(["--account", account.id])
          expect(command.status).toBe(1)
          expect(JSON.parse(command.stdout).mismatches).toHaveLength(2)
          expect(command.stderr).toContain("the books disagree with the ledger in 2 places")
          // Inside the ledger, past the drift check's reach: the row and the totals still match the entries.
          expect(JSON.parse(command.stdout).drift).toBe(0)
        }))

      it.effect("a missing entry breaks the sequence, the balances after it and its session's sums", () =>
        Effect.gen(function*() {
          const account = yield* busyAccount
          const walletId = yield* walletIdOf(account)
          yield* tamper((sql) => sql`DELETE FROM ledger_entries WHERE wallet_id = ${walletId} AND sequence = 3`)
          const checks = checksOf((yield* verifyAccount(account)).mismatches)
          expect(checks).toContainEqual({ check: "sequence", sequence: 4, session_id: undefined })
          expect(checks).toContainEqual({ check: "entry_balances", sequence: 4, session_id: undefined })
          expect(checks).toContainEqual({ check: "session", sequence: undefined, session_id: "released" })
        }))

      it.effect("a session row that disagrees with its entries is named", () =>
        Effect.gen(function*() {
          const account = yield* busyAccount
          const walletId = yield* walletIdOf(account)
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE settlement_sessions SET spent_usd = spent_usd + 0.5 WHERE wallet_id = ${walletId} AND session_id = 'overspent'`
            .pipe(Effect.orDie)
          const verdict = yield* verifyAccount(account)
          expect(verdict.mismatches).toEqual([{
            wallet_id: walletId,
            account_id: account.id,
            check: "session",
            session_id: "overspent",
            expected: { held_usd: "0.000000", spent_usd: "13.250000", unfunded_usd: "3.250000" },
            found: { held_usd: "0.000000", spent_usd: "13.750000", unfunded_usd: "3.250000" }
          }])
        }))

      it.effect("a running spend total that disagrees with the spend entries is named with its group (D16)", () =>
        Effect.gen(function*() {
          const account = yield* busyAccount
          const walletId = yield* walletIdOf(account)
          const sql = yield* SqlClient.SqlClient
          const [today] = yield* sql<{ day: string }>`
            SELECT day::text AS day FROM settlement_spend_totals WHERE wallet_id = ${walletId}`.pipe(Effect.orDie)
          yield* sql`UPDATE settlement_spend_totals SET sessions = sessions + 1, spent_usd = spent_usd + 1
                     WHERE wallet_id = ${walletId}`.pipe(Effect.orDie)
          const verdict = yield* verifyAccount(account)
          expect(verdict.mismatches).toEqual([{
            wallet_id: walletId,
            account_id: account.id,
            check: "spend_totals",
            group: { day: today?.day, repository_id: null, user_id: null, model: null, labels: {} },
            expected: { spent_usd: "17.500000", unfunded_usd: "3.250000", sessions: 3 },
            found: { spent_usd: "18.500000", unfunded_usd: "3.250000", sessions: 4 }
          }])
          // The drift check (D19) counts the group and names it the same way, on the money alone.
          expect(yield* driftOf(account)).toEqual({
            count: 1,
            mismatches: [{
              wallet_id: walletId,
              account_id: account.id,
              check: "spend_totals",
              group: { day: today?.day, repository_id: null, user_id: null },
              expected: { spent_usd: "17.500000", unfunded_usd: "3.250000" },
              found: { spent_usd: "18.500000", unfunded_usd: "3.250000" }
            }]
          })
          // A total with no spend behind it is named too.
          yield* sql`INSERT INTO settlement_spend_totals (wallet_id, day, spent_usd, sessions)
                     VALUES (${walletId}, '2001-01-01', 1, 1)`.pipe(Effect.orDie)
          const named = expect.objectContaining({
            check: "spend_totals",
            group: { day: "2001-01-01", repository_id: null, user_id: null, model: null, labels: {} },
            expected: null
          })
          expect((yield* verifyAccount(account)).mismatches).toContainEqual(named)
          const drift = yield* driftOf(account)
          expect(drift.count).toBe(2)
          // The drift check's groups span every model and labels of a day, repository and user.
          expect(drift.mismatches).toContainEqual(expect.objectContaining({
            check: "spend_totals",
            group: { day: "2001-01-01", repository_id: null, user_id: null },
            expected: null
          }))
          const command = yield* ledgerVerify(["--account", account.id])
          expect(command.status).toBe(1)
          expect(JSON.parse(command.stdout)).toMatchObject({ drift: 2 })
        }))

      it.effect("the wallet row that disagrees with its ledger is named, with what the ledger says", () =>
        Effect.gen(function*() {
          const account = yield* busyAccount
          const walletId = yield* walletIdOf(account)
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE wallets SET budget_usd = budget_usd + 5 WHERE id = ${walletId}`.pipe(Effect.orDie)
          const checks = checksOf((yield* verifyAccount(account)).mismatches)
          expect(checks).toEqual([{ check: "wallet_row", sequence: undefined, session_id: undefined }])
          // The drift check's one look at the newest entry finds it too, with both sides.
          expect(yield* driftOf(account)).toEqual({
            count: 1,
            mismatches: [{
              wallet_id: walletId,
              account_id: account.id,
              check: "wallet_row",
              expected: {
                budget_usd: "100.000000",
                reserved_usd: "9.250000",
                spent_usd: "17.500000",
                last_sequence: 10
              },
              found: { budget_usd: "105.000000", reserved_usd: "9.250000", spent_usd: "17.500000", last_sequence: 10 }
            }]
          })
        }))

      it.effect("the drift check sums a group's totals over however many rows hold it before comparing (D19)", () =>
        Effect.gen(function*() {
          const account = yield* busyAccount
          const walletId = yield* walletIdOf(account)
          const sql = yield* SqlClient.SqlClient
          // A group split over two rows, as a wider key (by model or labels, say) stores it. Inside a
          // transaction rolled back, since the table's key forbids it today.
          const split = Effect.gen(function*() {
            yield* sql`DROP INDEX settlement_spend_totals_key`
            yield* sql`
              INSERT INTO settlement_spend_totals (wallet_id, day, repository_id, user_id, spent_usd, unfunded_usd, sessions)
              SELECT wallet_id, day, repository_id, user_id, 2.5, 0.25, 0 FROM settlement_spend_totals WHERE wallet_id = ${walletId}`
            yield* sql`UPDATE settlement_spend_totals SET spent_usd = spent_usd - 2.5, unfunded_usd = unfunded_usd - 0.25
                       WHERE wallet_id = ${walletId} AND spent_usd > 2.5`
            const rows = yield* sql`SELECT 1 FROM settlement_spend_totals WHERE wallet_id = ${walletId}`
            expect(rows).toHaveLength(2)
            expect(yield* driftOf(account)).toEqual({ count: 0, mismatches: [] })
            // And a cent off across the two rows is still one group that disagrees.
            yield* sql`UPDATE settlement_spend_totals SET spent_usd = spent_usd + 0.01
                       WHERE wallet_id = ${walletId} AND spent_usd = 2.5`
            expect((yield* driftOf(account)).count).toBe(1)
            return yield* Effect.fail("rolled back" as const)
          })
          expect(yield* Effect.flip(sql.withTransaction(split))).toBe("rolled back")
          expect(yield* driftOf(account)).toEqual({ count: 0, mismatches: [] })
        }))
    })

    describe("credit grants (D21)", () => {
      it.effect("a clean ledger with grants verifies: every grant replays from its entries, and the command exits 0", () =>
        Effect.gen(function*() {
          const { account } = yield* grantedAccount
          expect(yield* grantKindsOf(account)).toEqual([
            "credit_added",
            "credit_expired",
            "credit_voided",
            "reserve",
            "reserve_release",
            "spend"
          ])
          const verdict = yield* verifyAccount(account)
          expect(verdict.mismatches).toEqual([])
          expect(yield* driftOf(account)).toEqual({ count: 0, mismatches: [] })
          const command = yield* ledgerVerify(["--account", account.id])
          expect(command.status, command.stderr).toBe(0)
          expect(JSON.parse(command.stdout)).toMatchObject({ wallets: 1, mismatches: [], drift: 0 })
        }))

      it.effect("a credit after the base went below zero verifies: its grant's free amount may be above the wallet's available", () =>
        Effect.gen(function*() {
          // An unenforced wallet holds beyond its budget; a credit then is a grant all free.
          const account = yield* newAccount()
          yield* runSession(account, "held", [], false)
          const wallets = yield* Wallets
          yield* wallets.addCredit(account, { amount_usd: Money.decimal("5"), idempotency_key: randomUUID() })
          const wallet = yield* wallets.get(account)
          expect(Money.format(wallet.available_usd)).toBe("-5.000000")
          expect(yield* verifyAccount(account)).toEqual({ wallets: 1, entries: 2, mismatches: [] })
          // Its session's spend draws the grant before the base, whose hold it was.
          const producer = yield* SettlementProducer
          const spend = yield* producer.enqueueSpend({
            account_id: account.id,
            session_id: "held",
            amount_usd: "7",
            idempotency_key: randomUUID()
          }).pipe(Effect.orDie)
          yield* spend.result().pipe(Effect.orDie)
          expect(yield* grantKindsOf(account)).toEqual(["credit_added", "spend"])
          expect((yield* verifyAccount(account)).mismatches).toEqual([])
          expect(yield* driftOf(account)).toEqual({ count: 0, mismatches: [] })
        }))

      it.effect("a grant row tampered with is named by ledger verify and counted by the drift check", () =>
        Effect.gen(function*() {
          const { account, grant } = yield* grantedAccount
          const walletId = yield* walletIdOf(account)
          const sql = yield* SqlClient.SqlClient
          const [row] = yield* sql<{ drawn: string; held: string }>`
            SELECT drawn_usd::text AS drawn, held_usd::text AS held FROM wallet_grants WHERE id = ${grant}`
            .pipe(Effect.orDie)
          const drawn = Money.decimal(row?.drawn ?? "0")
          yield* sql`UPDATE wallet_grants SET drawn_usd = drawn_usd + 1 WHERE id = ${grant}`.pipe(Effect.orDie)
          const named = {
            wallet_id: walletId,
            account_id: account.id,
            check: "grant",
            grant_id: grant,
            expected: expect.objectContaining({ drawn_usd: Money.format(drawn), state: "live" }),
            found: expect.objectContaining({ drawn_usd: Money.format(drawn.plus(1)), state: "live" })
          }
          // Every spend drew this grant: the grants have drawn more than the wallet spent.
          const [wallet] = yield* sql<
            { spent: string }
          >`SELECT spent_usd::text AS spent FROM wallets WHERE id = ${walletId}`
            .pipe(Effect.orDie)
          expect(Money.decimal(wallet?.spent ?? "0").eq(drawn)).toBe(true)
          expect((yield* verifyAccount(account)).mismatches).toEqual([named, {
            wallet_id: walletId,
            account_id: account.id,
            check: "grant_totals",
            expected: expect.objectContaining({ spent_usd: Money.format(drawn) }),
            found: expect.objectContaining({ spent_usd: Money.format(drawn.plus(1)) })
          }])
          expect(yield* driftOf(account)).toEqual({ count: 1, mismatches: [named] })
          const command = yield* ledgerVerify(["--account", account.id])
          expect(command.status).toBe(1)
          expect(JSON.parse(command.stdout)).toMatchObject({
            mismatches: [{ check: "grant", grant_id: grant, expected: { drawn_usd: Money.format(drawn) } }, {
              check: "grant_totals"
            }],
            drift: 1
          })

          // Its hold too: no longer what the open session earmarked on it.
          yield* sql`UPDATE wallet_grants SET drawn_usd = drawn_usd - 1, held_usd = held_usd + 1 WHERE id = ${grant}`
            .pipe(Effect.orDie)
          expect(checksOf((yield* verifyAccount(account)).mismatches).map(({ check }) => check)).toEqual([
            "grant",
            "grant_earmarks",
            "grant_totals"
          ])
          expect((yield* verifyAccount(account)).mismatches[1]).toEqual({
            wallet_id: walletId,
            account_id: account.id,
            check: "grant_earmarks",
            grant_id: grant,
            expected: { held_usd: Money.format(Money.decimal(row?.held ?? "0").plus(1)) },
            found: { earmarked_usd: Money.format(Money.decimal(row?.held ?? "0")) }
          })
          // And an expired grant shown live again is named by its state.
          yield* sql`UPDATE wallet_grants SET held_usd = held_usd - 1 WHERE id = ${grant}`.pipe(Effect.orDie)
          yield* sql`UPDATE wallet_grants SET state = 'live', ended_at = NULL, moving = true
                     WHERE wallet_id = ${walletId} AND state = 'expired'`.pipe(Effect.orDie)
          expect((yield* verifyAccount(account)).mismatches).toEqual([
            expect.objectContaining({
              check: "grant",
              expected: expect.objectContaining({ state: "expired", ended_at_set: true }),
              found: expect.objectContaining({ state: "live", ended_at_set: false })
            })
          ])
          expect((yield* driftOf(account)).count).toBe(1)
        }))
    })
  }
)
