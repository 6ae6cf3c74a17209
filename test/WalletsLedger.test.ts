import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option, Ref, Runtime, Schema } from "effect"
import fc from "fast-check"
import { Accounts } from "../src/Accounts.js"
import { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import type { Movement } from "../src/Domain/Movement.js"
import { encodedWallet, type LedgerEntry, LedgerPage, WalletRead } from "../src/Domain/Wallet.js"
import { Wallets } from "../src/Wallets.js"
import { type LedgerWriter, WalletLedger } from "../src/Wallets/Ledger.js"
import { signedInUser, TestApp } from "./support/TestApp.js"
import { getLedger, pageOf } from "./support/Wallets.js"

const TestLayer = Layer.merge(Wallets.Default, WalletLedger.Default).pipe(Layer.provideMerge(TestApp()))

const usd = Money.decimal

/** A fresh organisation account: cheaper than a user, and wallets are per account. */
const newAccount = Effect.gen(function*() {
  const accounts = yield* Accounts
  const organisation = yield* accounts.createOrganisation("Ledger test")
  return new Account({ kind: "client", id: organisation.id })
})

/** Every entry of the account's wallet, oldest first, read through the service's own paging. */
const allEntries = (account: Account) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    const entries: Array<LedgerEntry> = []
    let before = Option.none<string>()
    for (;;) {
      const page = yield* wallets.ledger(account, { before, limit: 500 })
      entries.push(...page.entries)
      if (page.next_before === null) return entries.reverse()
      before = Option.some(page.next_before)
    }
  })

const balancesOf = (entry: LedgerEntry) => ({
  budget: Money.format(entry.budget_after_usd),
  reserved: Money.format(entry.reserved_after_usd),
  spent: Money.format(entry.spent_after_usd)
})

/**
 * Replays the ledger from zero: every entry must follow from the one before it
 * by its kind and amount, hold available = budget - reserved - spent, and carry
 * the next sequence; the last one must be the wallet.
 */
const replay = (account: Account) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    const wallet = yield* wallets.get(account)
    const entries = yield* allEntries(account)
    let budget = Money.zero
    let reserved = Money.zero
    let spent = Money.zero
    let decisions = 0
    for (const [i, entry] of entries.entries()) {
      expect(entry.sequence).toBe(i + 1)
      switch (entry.kind) {
        case "budget_set":
        case "credit_added":
          budget = budget.plus(entry.amount_usd)
          decisions += 1
          break
        case "reserve":
          reserved = reserved.plus(entry.amount_usd)
          break
        case "reserve_release":
          reserved = reserved.minus(entry.amount_usd)
          break
        case "spend": {
          // The entry does not say how much of a spend came out of the hold; only that it was at most the amount.
          const fromHold = reserved.minus(entry.reserved_after_usd)
          expect(fromHold.gte(Money.zero) && fromHold.lte(entry.amount_usd)).toBe(true)
          reserved = entry.reserved_after_usd
          spent = spent.plus(entry.amount_usd)
          break
        }
      }
      expect(balancesOf(entry)).toEqual({
        budget: Money.format(budget),
        reserved: Money.format(reserved),
        spent: Money.format(spent)
      })
      expect(Money.format(entry.available_after_usd)).toBe(Money.format(budget.minus(reserved).minus(spent)))
    }
    expect({
      budget: Money.format(wallet.budget_usd),
      reserved: Money.format(wallet.reserved_usd),
      spent: Money.format(wallet.spent_usd),
      available: Money.format(wallet.available_usd),
      version: wallet.version,
      enforced: wallet.enforced
    }).toEqual({
      budget: Money.format(budget),
      reserved: Money.format(reserved),
      spent: Money.format(spent),
      available: Money.format(budget.minus(reserved).minus(spent)),
      version: decisions,
      enforced: decisions > 0
    })
    return entries
  })

const credit = (amount: string): Movement => ({ kind: "credit_added", amount_usd: usd(amount) })

layer(TestLayer, { excludeTestServices: true })("the wallet's movement primitive", (it) => {
  describe("WalletLedger.withLock and its LedgerWriter", () => {
    it.effect("a movement writes its entry with the balances after it and the next sequence, and returns the new wallet", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const moved = yield* ledgers.withLock(
          account,
          (ledger) => ledger.move({ kind: "budget_set", budget_usd: usd("20"), note: "opening" })
        )
        expect(moved.entry).toMatchObject({ sequence: 1, kind: "budget_set", note: "opening", payment_provider: null })
        expect(Money.format(moved.entry.amount_usd)).toBe("20.000000")
        expect(moved.wallet).toMatchObject({ owner_kind: "client", owner_id: account.id, version: 1, enforced: true })
        expect(moved.wallet).toEqual(yield* wallets.get(account))
        const reserve = yield* ledgers.withLock(
          account,
          (ledger) => ledger.move({ kind: "reserve", amount_usd: usd("7.5"), session_id: "s-1", task_id: "t-1" })
        )
        expect(reserve.entry).toMatchObject({ sequence: 2, kind: "reserve", session_id: "s-1", task_id: "t-1" })
        expect(balancesOf(reserve.entry)).toEqual({ budget: "20.000000", reserved: "7.500000", spent: "0.000000" })
        expect(Money.format(reserve.wallet.available_usd)).toBe("12.500000")
      }))

    it.effect("several movements under one lock each get their own entry, with consecutive sequences, and commit together", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const seen = yield* ledgers.withLock(account, (ledger) =>
          Effect.gen(function*() {
            const first = yield* ledger.moveAll([
              credit("10"),
              { kind: "reserve", amount_usd: usd("4"), session_id: "s-1" },
              { kind: "spend", amount_usd: usd("5"), from_reserved_usd: usd("4"), session_id: "s-1" }
            ])
            // The writer's view of the wallet follows its own movements, so rules see them.
            const current = yield* ledger.wallet
            const last = yield* ledger.move({ kind: "reserve", amount_usd: usd("1"), session_id: "s-2" })
            return { first, current, last }
          }))
        expect(seen.first.map((m) => [m.entry.sequence, m.entry.kind])).toEqual([
          [1, "credit_added"],
          [2, "reserve"],
          [3, "spend"]
        ])
        expect(seen.first.map((m) => Money.format(m.wallet.available_usd))).toEqual([
          "10.000000",
          "6.000000",
          "5.000000"
        ])
        expect(seen.current).toMatchObject({ version: 1, enforced: true })
        expect(Money.format(seen.current.spent_usd)).toBe("5.000000")
        expect(seen.last.entry.sequence).toBe(4)
        expect(seen.last.wallet).toEqual(yield* wallets.get(account))
        yield* replay(account)
      }))

    it.effect("a batch larger than one statement can carry is written whole, in order", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const moved = yield* ledgers.withLock(account, (ledger) =>
          ledger.moveAll(Array.from({ length: 2_500 }, () => credit("0.01"))))
        expect(moved.map((m) =>
          m.entry.sequence
        )).toEqual(Array.from({ length: 2_500 }, (_, i) => i + 1))
        expect(Money.format(moved[2_499]?.wallet.budget_usd ?? Money.zero)).toBe("25.000000")
        expect(yield* replay(account)).toHaveLength(2_500)
      }))

    it.effect("movements sent to one writer from concurrent fibers are written one after another", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const moved = yield* ledgers.withLock(account, (ledger) =>
          Effect.all(
            Array.from({ length: 10 }, (_, i) =>
              ledger.move({ kind: "reserve", amount_usd: usd("1"), session_id: `s-${i}` })),
            { concurrency: "unbounded" }
          ))
        expect(moved.map((m) => m.entry.sequence).sort((a, b) => a - b)).toEqual(
          Array.from({ length: 10 }, (_, i) => i + 1)
        )
        expect(yield* replay(account)).toHaveLength(10)
      }))

    it.effect("when the work under the lock fails, all of its movements are rolled back and no sequence is lost", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        yield* ledgers.withLock(account, (ledger) => ledger.move(credit("1")))
        const exit = yield* ledgers.withLock(
          account,
          (ledger) => Effect.zipRight(ledger.moveAll([credit("2"), credit("3")]), Effect.fail("settlement refused"))
        ).pipe(Effect.exit)
        expect(exit).toEqual(Exit.fail("settlement refused"))
        const after = yield* ledgers.withLock(account, (ledger) => ledger.move(credit("4")))
        expect(after.entry.sequence).toBe(2)
        expect(Money.format(after.wallet.budget_usd)).toBe("5.000000")
        yield* replay(account)
      }))

    it.effect("inside a caller's transaction, movements commit or roll back with it", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const sql = yield* SqlClient.SqlClient
        const account = yield* newAccount
        const failed = yield* sql.withTransaction(
          Effect.zipRight(
            ledgers.withLock(account, (ledger) => ledger.move(credit("2"))),
            Effect.fail("later step failed")
          )
        ).pipe(Effect.exit)
        expect(Exit.isFailure(failed)).toBe(true)
        expect(yield* allEntries(account)).toEqual([])
        yield* sql.withTransaction(ledgers.withLock(account, (ledger) => ledger.move(credit("3"))))
        expect((yield* allEntries(account)).map((e) => e.sequence)).toEqual([1])
      }))

    it.effect("session movements change the balances but neither the version nor enforcement", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const moved = yield* ledgers.withLock(account, (ledger) =>
          ledger.moveAll([
            { kind: "reserve", amount_usd: usd("3"), session_id: "s-1" },
            { kind: "spend", amount_usd: usd("1"), from_reserved_usd: usd("1"), session_id: "s-1" },
            { kind: "reserve_release", amount_usd: usd("2"), session_id: "s-1", note: "expired" }
          ]))
        const wallet = moved[2]?.wallet
        expect(wallet).toMatchObject({ version: 0, enforced: false })
        expect(wallet && Money.format(wallet.available_usd)).toBe("-1.000000")
        expect(moved[2]?.entry).toMatchObject({ kind: "reserve_release", note: "expired" })
      }))

    it.effect("a movement that would corrupt the books is refused as a defect, and nothing is written", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const refusals: ReadonlyArray<ReadonlyArray<Movement>> = [
          [{ kind: "reserve_release", amount_usd: usd("1"), session_id: "s-1" }],
          [{ kind: "reserve", amount_usd: usd("2"), session_id: "s" }, {
            kind: "spend",
            amount_usd: usd("1"),
            from_reserved_usd: usd("1.5"),
            session_id: "s"
          }],
          [credit("0")],
          [credit("1"), { kind: "budget_set", budget_usd: usd("-1") }],
          [credit("999999999999.999999"), credit("0.000001")]
        ]
        for (const movements of refusals) {
          const exit = yield* ledgers.withLock(account, (ledger) => ledger.moveAll(movements)).pipe(Effect.exit)
          expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
        }
        expect(yield* allEntries(account)).toEqual([])
      }))

    it.effect("a writer kept past its transaction is refused", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        const leaked = yield* Ref.make(Option.none<LedgerWriter>())
        yield* ledgers.withLock(account, (ledger) => Ref.set(leaked, Option.some(ledger)))
        const writer = Option.getOrThrow(yield* Ref.get(leaked))
        const exit = yield* writer.move(credit("1")).pipe(Effect.exit)
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
        expect(yield* allEntries(account)).toEqual([])
      }))

    it.effect("concurrent lockers of one wallet take turns: no movement is lost and sequences have no gaps", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const ledgers = yield* WalletLedger
        const account = yield* newAccount
        yield* Effect.all(
          Array.from(
            { length: 25 },
            (_, i) =>
              ledgers.withLock(
                account,
                (ledger) => ledger.move({ kind: "reserve", amount_usd: usd("0.1"), session_id: `s-${i}` })
              )
          ),
          { concurrency: "unbounded" }
        )
        const wallet = yield* wallets.get(account)
        expect(Money.format(wallet.reserved_usd)).toBe("2.500000")
        expect((yield* replay(account)).map((e) => e.sequence)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1))
      }))
  })

  describe("the ledger in the database", () => {
    it.effect("a page as PostgreSQL writes it is what LedgerPage encodes, byte for byte (D7)", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const wallets = yield* Wallets
        const account = yield* newAccount
        const firstPage = { before: Option.none(), limit: 500 }
        expect(yield* wallets.ledgerJson(account, firstPage)).toBe(JSON.stringify({ entries: [], next_before: null }))
        // Every shape an entry takes: signed and fractional amounts, a negative available, notes
        // that need escaping, sessions and none.
        yield* ledgers.withLock(account, (ledger) =>
          ledger.moveAll([
            { kind: "budget_set", budget_usd: usd("12.5"), note: "first, \"quoted\" \\ back\tslash\u0001/" },
            { kind: "budget_set", budget_usd: usd("10.000001") },
            { kind: "reserve", amount_usd: usd("3.25"), session_id: "s-\"1\"", task_id: "t-1" },
            {
              kind: "spend",
              amount_usd: usd("20"),
              from_reserved_usd: usd("3.25"),
              session_id: "s-\"1\"",
              task_id: "t-1"
            },
            { kind: "credit_added", amount_usd: usd("999999.999999"), note: "ünïcödé ✓ 𝄞" }
          ]))
        for (const limit of [500, 5, 2, 1]) {
          let before = Option.none<string>()
          for (;;) {
            const json = yield* wallets.ledgerJson(account, { before, limit })
            const decoded = yield* Schema.decodeUnknown(Schema.parseJson(LedgerPage))(json)
            expect(yield* Schema.encode(Schema.parseJson(LedgerPage))(decoded)).toBe(json)
            expect(decoded).toEqual(yield* wallets.ledger(account, { before, limit }))
            if (decoded.next_before === null) break
            before = Option.some(decoded.next_before)
          }
        }
        const { entries: [newest] } = JSON.parse(
          yield* wallets.ledgerJson(account, firstPage)
        ) as typeof LedgerPage.Encoded
        expect(newest).toMatchObject({ sequence: 5, amount_usd: "999999.999999", available_after_usd: "999990.000000" })
      }))

    it.effect("a wallet as PostgreSQL writes it, and field by field, is what Schema.encode(Wallet) writes", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const wallets = yield* Wallets
        const account = yield* newAccount
        // The read adds the soonest grant to expire (D21): none here.
        const encodedBySchema = Effect.flatMap(
          wallets.get(account),
          (wallet) =>
            Effect.map(Schema.encode(WalletRead)(new WalletRead({ ...wallet, next_expiry: null })), (encoded) => ({
              wallet,
              json: JSON.stringify(encoded)
            }))
        )
        const withoutExpiry = (json: string) => json.replace(/,"next_expiry":null}$/, "}")
        // The first read creates the wallet.
        const created = yield* wallets.getJson(account)
        const fresh = yield* encodedBySchema
        expect(created).toBe(fresh.json)
        expect(JSON.stringify(encodedWallet(fresh.wallet))).toBe(withoutExpiry(fresh.json))
        // Fractional amounts, an over-spend's negative available, a budget decision's version.
        yield* ledgers.withLock(account, (ledger) =>
          ledger.moveAll([
            { kind: "budget_set", budget_usd: usd("10.000001") },
            { kind: "reserve", amount_usd: usd("3.25"), session_id: "s-1", task_id: null },
            { kind: "spend", amount_usd: usd("20.5"), from_reserved_usd: usd("3.25"), session_id: "s-1", task_id: null }
          ]))
        const moved = yield* encodedBySchema
        expect(Money.format(moved.wallet.available_usd)).toBe("-10.499999")
        expect(moved.wallet.version).toBe(1)
        expect(yield* wallets.getJson(account)).toBe(moved.json)
        expect(JSON.stringify(encodedWallet(moved.wallet))).toBe(withoutExpiry(moved.json))
      }))

    it.effect("refuses to update, delete or truncate entries, whoever asks", () =>
      Effect.gen(function*() {
        const ledgers = yield* WalletLedger
        const sql = yield* SqlClient.SqlClient
        const account = yield* newAccount
        const { entry } = yield* ledgers.withLock(account, (ledger) => ledger.move(credit("5")))
        const attempts = [
          sql`UPDATE ledger_entries SET amount_usd = 500 WHERE id = ${entry.id}`,
          sql`UPDATE ledger_entries SET note = 'edited' WHERE id = ${entry.id}`,
          sql`DELETE FROM ledger_entries WHERE id = ${entry.id}`,
          sql`TRUNCATE ledger_entries`
        ]
        for (const attempt of attempts) {
          const exit = yield* Effect.exit(attempt)
          expect(Exit.isFailure(exit)).toBe(true)
          const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
          expect(error).toBeInstanceOf(SqlError)
          expect(String((error as SqlError).cause)).toMatch(
            /ledger entries are append-only: (UPDATE|DELETE|TRUNCATE) is refused/
          )
        }
        const [stored] = yield* allEntries(account)
        expect(stored).toEqual(entry)
      }))

    it.effect("refuses an entry whose available is not budget - reserved - spent", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const sql = yield* SqlClient.SqlClient
        const account = yield* newAccount
        const wallet = yield* wallets.get(account)
        const exit = yield* Effect.exit(sql`
          INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
            spent_after_usd, available_after_usd)
          VALUES (${wallet.id}, 1, 'credit_added', 1, 1, 0, 0, 2)`)
        expect(Exit.isFailure(exit)).toBe(true)
      }))

    it.effect(
      "paging through 1,000 entries with limits 1, 7, 100 and 500 has no gap and no duplicate",
      () =>
        Effect.gen(function*() {
          const wallets = yield* Wallets
          const ledgers = yield* WalletLedger
          const user = yield* signedInUser()
          const account = new Account({ kind: "user", id: user.id })
          yield* ledgers.withLock(account, (ledger) =>
            ledger.moveAll(Array.from({ length: 1_000 }, (_, i) =>
              credit(`0.${String(i + 1).padStart(6, "0")}`))))
          const newestFirst = Array.from({ length: 1_000 }, (_, i) =>
            1_000 - i)
          // Clients paging side by side over HTTP, one per limit.
          yield* Effect.forEach([7, 100, 500], (limit) =>
            Effect.gen(function*() {
              const sequences: Array<number> = []
              let before: string | null = null
              let pages = 0
              do {
                const query: string = before === null ? `limit=${limit}` : `limit=${limit}&before=${before}`
                const reply = yield* getLedger(user.token, query)
                expect(reply.status).toBe(200)
                const page = pageOf(reply)
                expect(page.entries.length).toBeLessThanOrEqual(limit)
                sequences.push(...page.entries.map((e) => e.sequence))
                before = page.next_before
                pages += 1
              } while (before !== null)
              expect(sequences, `limit ${limit}`).toEqual(newestFirst)
              expect(pages).toBe(Math.ceil(1_000 / limit))
            }), { concurrency: "unbounded", discard: true })
          // Limit 1 walks the same keyset query a thousand times; through the service it takes a second, not a
          // thousand HTTP round trips (the handler only parses limit and before, which the HTTP tests cover).
          const one: Array<number> = []
          let before = Option.none<string>()
          for (;;) {
            const page = yield* wallets.ledger(account, { before, limit: 1 })
            one.push(...page.entries.map((e) => e.sequence))
            if (page.next_before === null) break
            before = Option.some(page.next_before)
          }
          expect(one).toEqual(newestFirst)
          const wallet = yield* wallets.get(account)
          expect(Money.format(wallet.budget_usd)).toBe("0.500500")
        }),
      60_000
    )
  })

  describe("properties", () => {
    type Command =
      | { readonly op: "set"; readonly micros: number; readonly stale: boolean }
      | { readonly op: "credit"; readonly micros: number }
      | { readonly op: "reserve"; readonly micros: number }
      | { readonly op: "spend"; readonly micros: number; readonly fromHoldPercent: number }
      | { readonly op: "release"; readonly percent: number }

    // Whole micro-dollars, turned into decimal strings with integer arithmetic only.
    const micros = fc.integer({ min: 0, max: 5_000_000_000 })
    const fromMicros = (n: bigint) => usd(`${n / 1_000_000n}.${String(n % 1_000_000n).padStart(6, "0")}`)
    const microsOf = (amount: Money.Decimal) => BigInt(Money.format(amount).replace(".", ""))
    const amountOf = (n: number) => fromMicros(BigInt(n))

    const command: fc.Arbitrary<Command> = fc.oneof(
      fc.record({ op: fc.constant("set" as const), micros, stale: fc.boolean() }),
      fc.record({ op: fc.constant("credit" as const), micros: micros.filter((n) => n > 0) }),
      fc.record({ op: fc.constant("reserve" as const), micros: micros.filter((n) => n > 0) }),
      fc.record({
        op: fc.constant("spend" as const),
        micros: micros.filter((n) => n > 0),
        fromHoldPercent: fc.integer({ min: 0, max: 100 })
      }),
      fc.record({ op: fc.constant("release" as const), percent: fc.integer({ min: 1, max: 100 }) })
    )

    /** A share of an amount, rounded down to the micro-dollar. */
    const share = (amount: Money.Decimal, percent: number) => fromMicros(microsOf(amount) * BigInt(percent) / 100n)

    const run = (account: Account, commands: ReadonlyArray<Command>) =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const ledgers = yield* WalletLedger
        // Every credit is a grant (D21) that these raw movements never draw: all of it stays free.
        let credited = Money.zero
        for (const c of commands) {
          const wallet = yield* wallets.get(account)
          switch (c.op) {
            case "set": {
              const outcome = yield* wallets.setBudget(account, {
                budget_usd: amountOf(c.micros),
                expected_version: c.stale ? wallet.version + 1 : wallet.version
              }).pipe(Effect.either)
              const committed = wallet.reserved_usd.plus(wallet.spent_usd).plus(credited)
              if (c.stale) expect(outcome).toMatchObject({ _tag: "Left", left: { _tag: "VersionConflict" } })
              else if (amountOf(c.micros).lt(committed)) {
                expect(outcome).toMatchObject({ _tag: "Left", left: { _tag: "BudgetBelowCommitted" } })
              } else expect(outcome._tag).toBe("Right")
              break
            }
            case "credit":
              yield* wallets.addCredit(account, { amount_usd: amountOf(c.micros) })
              credited = credited.plus(amountOf(c.micros))
              break
            case "reserve":
              yield* ledgers.withLock(account, (ledger) =>
                ledger.move({ kind: "reserve", amount_usd: amountOf(c.micros), session_id: "s" }))
              break
            case "spend": {
              const amount = amountOf(c.micros)
              const fromHold = share(wallet.reserved_usd.lt(amount) ? wallet.reserved_usd : amount, c.fromHoldPercent)
              yield* ledgers.withLock(account, (ledger) =>
                ledger.move({ kind: "spend", amount_usd: amount, from_reserved_usd: fromHold, session_id: "s" }))
              break
            }
            case "release": {
              const amount = share(wallet.reserved_usd, c.percent)
              if (amount.gt(Money.zero)) {
                yield* ledgers.withLock(account, (ledger) =>
                  ledger.move({ kind: "reserve_release", amount_usd: amount, session_id: "s" }))
              }
              break
            }
          }
          const after = yield* wallets.get(account)
          expect(Money.format(after.available_usd)).toBe(
            Money.format(after.budget_usd.minus(after.reserved_usd).minus(after.spent_usd))
          )
        }
        yield* replay(account)
      })

    it.effect(
      "random budget sets, credits and session movements keep available = budget - reserved - spent, and the ledger replays to the wallet",
      () =>
        Effect.gen(function*() {
          const runtime = yield* Effect.runtime<Wallets | WalletLedger | Accounts>()
          yield* Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(
                fc.array(command, { minLength: 1, maxLength: 15 }),
                (commands) =>
                  Runtime.runPromise(runtime)(Effect.flatMap(newAccount, (account) => run(account, commands)))
              ),
              { numRuns: 30, interruptAfterTimeLimit: 20_000 }
            )
          )
        }),
      40_000
    )
  })
})
