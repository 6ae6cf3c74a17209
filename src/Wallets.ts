import { Effect, Option } from "effect"
import { type Account, isUuid } from "./Domain/Account.js"
import { ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import { BudgetBelowCommitted, LedgerEntryNotFound, LedgerPage } from "./Domain/Wallet.js"
import { entryOf, WalletLedger, walletOf } from "./Wallets/Ledger.js"
import { WalletsRepo } from "./Wallets/Repo.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

/** A budget decision by a person (D6); `expected_version` omitted means "I expect 0". */
export interface SetBudgetInput {
  readonly budget_usd: Money.Decimal
  readonly expected_version?: number | undefined
  readonly note?: string | undefined
  /** Recorded on the entry, for the export (D13). */
  readonly idempotency_key?: string | undefined
}

export interface AddCreditInput {
  readonly amount_usd: Money.Decimal
  readonly note?: string | undefined
  readonly idempotency_key?: string | undefined
}

/** The account-wide wallet: reads, budget decisions and credits, and the ledger's pages (D6, D7). */
export class Wallets extends Effect.Service<Wallets>()("Wallets", {
  effect: Effect.gen(function*() {
    const repo = yield* WalletsRepo
    const { withLock } = yield* WalletLedger

    /** The wallet of an account, created on first read (D6): version 0, zeros, not enforced. */
    const get = Effect.fn("Wallets.get")(function*(account: Account) {
      const found = yield* repo.findWallet(account)
      if (Option.isSome(found)) return walletOf(found.value)
      yield* repo.insertWalletsIfAbsent([account]).pipe(Effect.catchTag("WalletLocked", Effect.die))
      const created = yield* repo.findWallet(account)
      return yield* Option.match(created, {
        onNone: () => Effect.dieMessage(`the wallet of ${account.kind} ${account.id} vanished after its creation`),
        onSome: (row) => Effect.succeed(walletOf(row))
      })
    })

    /** PUT /developer/account/wallet: version, then budget floor, then the budget_set entry (D6). */
    const setBudget = Effect.fn("Wallets.setBudget")(function*(account: Account, input: SetBudgetInput) {
      return yield* withLock(account, (ledger) =>
        Effect.gen(function*() {
          const wallet = yield* ledger.wallet
          if (wallet.version !== (input.expected_version ?? 0)) {
            return yield* new VersionConflict({
              detail: "The wallet was changed by another writer; read it again and decide again.",
              current_version: wallet.version
            })
          }
          const committed = wallet.reserved_usd.plus(wallet.spent_usd)
          if (input.budget_usd.lt(committed)) {
            return yield* new BudgetBelowCommitted({
              detail: `The budget cannot be lower than what is spent and reserved (${Money.format(committed)}).`,
              minimum_budget_usd: committed
            })
          }
          const moved = yield* ledger.move({
            kind: "budget_set",
            budget_usd: input.budget_usd,
            note: input.note,
            idempotency_key: input.idempotency_key
          })
          return moved.wallet
        }))
    })

    /** POST /developer/account/wallet/credits: adds to the budget with a credit_added entry (D6). */
    const addCredit = Effect.fn("Wallets.addCredit")(function*(account: Account, input: AddCreditInput) {
      return yield* withLock(account, (ledger) =>
        Effect.gen(function*() {
          const wallet = yield* ledger.wallet
          if (wallet.budget_usd.plus(input.amount_usd).gt(Money.max)) {
            return yield* ValidationFailed.at(
              "#/amount_usd",
              `would raise the budget above ${Money.format(Money.max)}`
            )
          }
          const moved = yield* ledger.move({
            kind: "credit_added",
            amount_usd: input.amount_usd,
            note: input.note,
            idempotency_key: input.idempotency_key
          })
          return moved.wallet
        }))
    })

    /** A page of the ledger, newest first (D7); `before` must be an entry of this account's wallet. */
    const ledger = Effect.fn("Wallets.ledger")(function*(
      account: Account,
      page: { readonly before: Option.Option<string>; readonly limit: number }
    ) {
      const notFound = () =>
        new LedgerEntryNotFound({ detail: "No ledger entry of this account has the id given as before." })
      const wallet = yield* repo.findWallet(account)
      if (Option.isNone(wallet)) {
        return yield* Option.isSome(page.before) ? Effect.fail(notFound()) : Effect.succeed(
          new LedgerPage({ entries: [], next_before: null })
        )
      }
      let beforeSequence: number | null = null
      if (Option.isSome(page.before)) {
        const found = isUuid(page.before.value)
          ? yield* repo.findEntrySequence({ wallet_id: wallet.value.id, id: page.before.value })
          : Option.none()
        if (Option.isNone(found)) return yield* notFound()
        beforeSequence = found.value.sequence
      }
      const rows = yield* repo.pageEntries({
        wallet_id: wallet.value.id,
        before_sequence: beforeSequence,
        limit: page.limit + 1
      })
      const entries = rows.slice(0, page.limit).map(entryOf)
      const last = entries[entries.length - 1]
      return new LedgerPage(
        { entries, next_before: rows.length > page.limit && last !== undefined ? last.id : null },
        trusted
      )
    })

    return { get, setBudget, addCredit, ledger } as const
  }),
  dependencies: [WalletLedger.Default, WalletsRepo.Default]
}) {}
