import { Effect, Option, Schema, Stream } from "effect"
import { type Account, isUuid } from "./Domain/Account.js"
import { ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import {
  BudgetBelowCommitted,
  encodedWallet,
  LedgerEntryNotFound,
  LedgerPage,
  SESSION_ENTRIES_LISTED,
  SessionNotFound,
  WalletSession,
  WalletSessionDetail,
  WalletSessionPage
} from "./Domain/Wallet.js"
import { entryOf, WalletLedger, walletOf } from "./Wallets/Ledger.js"
import { type ExportRow, type SessionViewRow, WalletsRepo } from "./Wallets/Repo.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

const decodeLedgerPage = Schema.decodeSync(Schema.parseJson(LedgerPage))

/** Which sessions a page lists (D12): the view's two states over the rows' three. */
const STATES_LISTED = { open: ["open"], closed: ["released", "expired"], all: ["open", "released", "expired"] } as const

const sessionOf = (row: SessionViewRow): WalletSession => {
  const open = row.state === "open"
  return new WalletSession({
    session_id: row.session_id,
    task_id: row.task_id,
    state: open ? "open" : "closed",
    reserved_usd: row.held_usd,
    spent_usd: row.spent_usd,
    unfunded_usd: row.unfunded_usd,
    opened_at: row.created_at,
    last_activity_at: row.updated_at,
    expires_at: open ? row.expires_at : null,
    closed_reason: row.state === "open" ? null : row.state
  }, trusted)
}

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

    /** A page of the account's sessions, newest first (D12); `before` must be one of its sessions. */
    const sessions = Effect.fn("Wallets.sessions")(function*(
      account: Account,
      page: {
        readonly state: keyof typeof STATES_LISTED
        readonly before: Option.Option<string>
        readonly limit: number
      }
    ) {
      const wallet = yield* repo.findWallet(account)
      const unknown = () => new SessionNotFound({ detail: "No session of this account has the id given as before." })
      if (Option.isNone(wallet)) {
        return yield* Option.isSome(page.before)
          ? Effect.fail(unknown())
          : Effect.succeed(new WalletSessionPage({ sessions: [], next_before: null }))
      }
      if (Option.isSome(page.before)) {
        const found = yield* repo.findSession({ wallet_id: wallet.value.id, session_id: page.before.value })
        if (Option.isNone(found)) return yield* unknown()
      }
      const rows = yield* repo.pageSessions({
        wallet_id: wallet.value.id,
        states: STATES_LISTED[page.state],
        before: Option.getOrNull(page.before),
        limit: page.limit + 1
      })
      const listed = rows.slice(0, page.limit).map(sessionOf)
      const last = listed[listed.length - 1]
      return new WalletSessionPage(
        { sessions: listed, next_before: rows.length > page.limit && last !== undefined ? last.session_id : null },
        trusted
      )
    })

    /** One session with its entries, oldest first, at most 1,000 (D12). */
    const session = Effect.fn("Wallets.session")(function*(account: Account, sessionId: string) {
      const unknown = () => new SessionNotFound({ detail: "This account has no session with that id." })
      const wallet = yield* repo.findWallet(account)
      if (Option.isNone(wallet)) return yield* unknown()
      const row = yield* repo.findSession({ wallet_id: wallet.value.id, session_id: sessionId })
      if (Option.isNone(row)) return yield* unknown()
      const entries = yield* repo.sessionEntries({
        wallet_id: wallet.value.id,
        session_id: sessionId,
        limit: SESSION_ENTRIES_LISTED + 1
      })
      return new WalletSessionDetail({
        ...sessionOf(row.value),
        entries: entries.slice(0, SESSION_ENTRIES_LISTED).map(entryOf),
        entries_truncated: entries.length > SESSION_ENTRIES_LISTED
      }, trusted)
    })

    /** Every entry of the account's wallet in a time range, oldest first, streamed (D13). */
    const exportLedger = Effect.fn("Wallets.exportLedger")(function*(
      account: Account,
      range: { readonly from: Option.Option<Date>; readonly to: Option.Option<Date> }
    ) {
      const wallet = yield* repo.findWallet(account)
      return Option.match(wallet, {
        onNone: (): Stream.Stream<ExportRow> => Stream.empty,
        onSome: ({ id }) =>
          repo.exportEntries({ wallet_id: id, from: Option.getOrNull(range.from), to: Option.getOrNull(range.to) })
      })
    })

    return { get, getJson, setBudget, addCredit, ledger, ledgerJson, sessions, session, exportLedger } as const
  }),
  dependencies: [WalletLedger.Default, WalletsRepo.Default]
}) {}
