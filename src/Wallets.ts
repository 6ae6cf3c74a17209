import { Chunk, DateTime, Effect, Option, Schema, Stream } from "effect"
import { type Account, isUuid } from "./Domain/Account.js"
import { crossingEvents } from "./Domain/BalanceAlerts.js"
import { ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import {
  BudgetBelowCommitted,
  encodedWallet,
  LedgerEntryNotFound,
  LedgerPage,
  type Wallet,
  WalletAsOf
} from "./Domain/Wallet.js"
import { Events } from "./Events.js"
import { entryOf, type Moved, WalletLedger, walletOf } from "./Wallets/Ledger.js"
import { type ExportRow, WalletsRepo } from "./Wallets/Repo.js"

/** Entries per statement of the export: a few hundred kilobytes of CSV, a few milliseconds of a connection. */
const EXPORT_PAGE_ROWS = 500

const decodeLedgerPage = Schema.decodeSync(Schema.parseJson(LedgerPage))

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
    const events = yield* Events

    /**
     * The events of a budget decision (D17), appended in its transaction: the decision itself, and
     * the alert thresholds and depletion it crossed, decided from the wallet before and after it
     * against the thresholds as saved now.
     */
    const recordDecision = (
      account: Account,
      type: "wallet.budget_set" | "wallet.credit_added",
      before: Wallet,
      moved: Moved
    ) =>
      Effect.gen(function*() {
        const thresholds = yield* events.thresholds(account)
        yield* events.append([
          { account, event: { type, data: { entry: moved.entry, wallet: moved.wallet } } },
          ...crossingEvents(thresholds, before, moved.wallet).map((event) => ({ account, event }))
        ])
      })

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

    /**
     * The wallet as the JSON the API sends, written by PostgreSQL; created on the first read, as
     * `get` does. Runs for every wallet read, so it is not traced.
     */
    const getJson = Effect.fnUntraced(function*(account: Account) {
      const found = yield* repo.findWalletJson(account)
      if (Option.isSome(found)) return found.value
      return JSON.stringify(encodedWallet(yield* get(account)))
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
          yield* recordDecision(account, "wallet.budget_set", wallet, moved)
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
          yield* recordDecision(account, "wallet.credit_added", wallet, moved)
          return moved.wallet
        }))
    })

    /** A page of the ledger, newest first (D7); `before` must be an entry of this account's wallet. */
    /**
     * A page of the ledger, newest first (D7), as the JSON the API sends: PostgreSQL writes it,
     * so its entries go out without being decoded and encoded one by one. `before` must be an
     * entry of this account's wallet. Runs for every page read, so it is not traced.
     */
    const ledgerJson = Effect.fnUntraced(function*(
      account: Account,
      page: { readonly before: Option.Option<string>; readonly limit: number }
    ) {
      const before = Option.getOrNull(page.before)
      const json = before === null || isUuid(before)
        ? yield* repo.pageJson({ account, before, limit: page.limit })
        : Option.none()
      if (Option.isNone(json)) {
        return yield* new LedgerEntryNotFound({ detail: "No ledger entry of this account has the id given as before." })
      }
      return json.value
    })

    /** The same page as values (amounts as decimals, times as DateTimes), for callers inside the service. */
    const ledger = (account: Account, page: { readonly before: Option.Option<string>; readonly limit: number }) =>
      Effect.map(ledgerJson(account, page), decodeLedgerPage)

    /**
     * GET /developer/account/wallet/as-of (D19): the balances after the last entry at or before
     * `time` (the repository's rule), zeros before the first; reading does not create the wallet,
     * which has no entry before it exists. A time later than now (the service's clock) is refused:
     * its balances are not known yet.
     */
    const asOf = Effect.fn("Wallets.asOf")(function*(account: Account, time: DateTime.Utc) {
      if (DateTime.greaterThan(time, yield* DateTime.now)) {
        return yield* ValidationFailed.at("#/query/time", "must not be later than now")
      }
      const entry = yield* repo.entryAsOf({ account, time: DateTime.formatIso(time) })
      return Option.match(entry, {
        onNone: () =>
          new WalletAsOf({
            as_of: time,
            budget_usd: Money.zero,
            reserved_usd: Money.zero,
            spent_usd: Money.zero,
            available_usd: Money.zero,
            entry_id: null,
            sequence: 0
          }),
        onSome: (found) =>
          new WalletAsOf({
            as_of: time,
            budget_usd: found.budget_after_usd,
            reserved_usd: found.reserved_after_usd,
            spent_usd: found.spent_after_usd,
            available_usd: found.available_after_usd,
            entry_id: found.id,
            sequence: found.sequence
          })
      })
    })

    /** The id of the account's wallet, if it has one; reading does not create it. */
    const findId = Effect.fn("Wallets.findId")(function*(account: Account) {
      return Option.map(yield* repo.findWallet(account), (wallet) => wallet.id)
    })

    /** A settlement session's entries in the wallet's ledger, oldest first, at most `limit` (D12). */
    const sessionEntries = Effect.fn("Wallets.sessionEntries")(function*(
      walletId: string,
      sessionId: string,
      limit: number
    ) {
      const rows = yield* repo.sessionEntries({ wallet_id: walletId, session_id: sessionId, limit })
      return rows.map(entryOf)
    })

    /**
     * Which of the wallet's sessions were ever funded: a reserve applied or a spend booked (a
     * reserve or spend entry of theirs); a session whose every reserve was refused has none (D12).
     */
    const fundedSessions = Effect.fn("Wallets.fundedSessions")(function*(
      walletId: string,
      sessionIds: ReadonlyArray<string>
    ) {
      if (sessionIds.length === 0) return new Set<string>()
      const rows = yield* repo.fundedSessions({ wallet_id: walletId, session_ids: sessionIds })
      return new Set(rows.map((row) => row.session_id))
    })

    /**
     * Every entry of the account's wallet in a time range, oldest first (D13), read a page at a
     * time: the first page before anything is sent (so a failure there is an answer of its own),
     * each later one only when the stream is pulled again, that is when the client has taken the
     * one before.
     */
    const exportLedger = Effect.fn("Wallets.exportLedger")(function*(
      account: Account,
      range: { readonly from: Option.Option<Date>; readonly to: Option.Option<Date> }
    ) {
      const wallet = yield* repo.findWallet(account)
      if (Option.isNone(wallet)) return Stream.empty
      const page = (after: string) =>
        repo.exportPage({
          wallet_id: wallet.value.id,
          from: Option.getOrNull(range.from),
          to: Option.getOrNull(range.to),
          after,
          limit: EXPORT_PAGE_ROWS
        })
      const next = (rows: ReadonlyArray<ExportRow>): Option.Option<string> => {
        const last = rows[rows.length - 1]
        return rows.length < EXPORT_PAGE_ROWS || last === undefined ? Option.none() : Option.some(last.sequence)
      }
      const first = yield* page("0")
      return Stream.paginateChunkEffect(
        first as ReadonlyArray<ExportRow> | string,
        (state) =>
          Effect.map(
            typeof state === "string" ? page(state) : Effect.succeed(state),
            (rows) => [Chunk.unsafeFromArray(rows), next(rows)] as const
          )
      )
    })

    return {
      get,
      getJson,
      setBudget,
      addCredit,
      ledger,
      ledgerJson,
      asOf,
      findId,
      sessionEntries,
      fundedSessions,
      exportLedger
    } as const
  }),
  dependencies: [WalletLedger.Default, WalletsRepo.Default, Events.Default]
}) {}
