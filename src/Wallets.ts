import { Chunk, DateTime, Effect, Option, Schema, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { type Account, isUuid } from "./Domain/Account.js"
import { crossingEvents } from "./Domain/BalanceAlerts.js"
import { ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import type { NewEvent } from "./Domain/Events.js"
import {
  DEFAULT_CATEGORY,
  DEFAULT_PRIORITY,
  endingMovement,
  freeOf,
  type GrantBalance,
  type GrantBook,
  type GrantCategory,
  GrantList,
  GrantNotFound,
  GrantNotLive,
  makeGrantBook,
  MAX_EXPIRY_YEARS
} from "./Domain/Grants.js"
import * as Money from "./Domain/Money.js"
import {
  BudgetBelowCommitted,
  CreditAdded,
  encodedWallet,
  LedgerEntryNotFound,
  LedgerPage,
  WalletAsOf
} from "./Domain/Wallet.js"
import { Events } from "./Events.js"
import { balanceOf, type GrantRow, grantView } from "./Wallets/GrantRows.js"
import { GrantsRepo } from "./Wallets/GrantsRepo.js"
import { entryOf, type LedgerWriter, WalletLedger, walletOf } from "./Wallets/Ledger.js"
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
  /** The grant's terms (D21): never expiring, priority 50 and paid when left out. */
  readonly expires_at?: DateTime.Utc | undefined
  readonly priority?: number | undefined
  readonly category?: GrantCategory | undefined
}

export interface VoidGrantInput {
  readonly note?: string | undefined
  readonly idempotency_key?: string | undefined
}

/** What a mutation inside a wallet's lock sees of its grants (D21), every due one ended already. */
interface LockedGrants {
  readonly ledger: LedgerWriter
  readonly book: GrantBook
  readonly rows: ReadonlyMap<string, GrantRow>
  readonly now: Date
}

/** The account-wide wallet: reads, budget decisions and credits, and the ledger's pages (D6, D7). */
export class Wallets extends Effect.Service<Wallets>()("Wallets", {
  effect: Effect.gen(function*() {
    const repo = yield* WalletsRepo
    const grantsRepo = yield* GrantsRepo
    const { withLock } = yield* WalletLedger
    const events = yield* Events

    /**
     * A person's decision under the wallet's lock, with its grants: every grant due by the
     * transaction's time is ended first, with its entry and `grant.expired` (D21: the next writer
     * of a wallet writes a due expiry before its own change, so a budget set now is the budget
     * after it). `use` answers its value and its own events; the grants it moved are written
     * with them, and the alert crossings of the whole change are judged from the wallet before it.
     */
    const withGrants = <A, E, R>(
      account: Account,
      use: (locked: LockedGrants) => Effect.Effect<
        { readonly value: A; readonly events: ReadonlyArray<NewEvent> },
        E,
        R
      >
    ) =>
      withLock(account, (ledger) =>
        Effect.gen(function*() {
          const before = yield* ledger.wallet
          const rows = yield* grantsRepo.moving(before.id)
          const book = makeGrantBook(rows.map(balanceOf))
          const now = DateTime.toDate(ledger.time)
          const endings = book.expireDue(now)
          const expired = yield* ledger.moveAll(endings.map(endingMovement))
          const byId = new Map(rows.map((row) => [row.id, row]))
          const done = yield* use({ ledger, book, rows: byId, now })
          yield* grantsRepo.update(book.changed())
          const after = yield* ledger.wallet
          const thresholds = yield* events.thresholds(account)
          const expiredEvents = endings.flatMap((ending, i): Array<NewEvent> => {
            const row = byId.get(ending.grant_id)
            const entry = expired[i]?.entry
            const balance = book.all().find((grant) => grant.id === ending.grant_id)
            return row === undefined || entry === undefined || balance === undefined
              ? []
              : [{ type: "grant.expired", data: { grant: grantView(row, balance), entry } }]
          })
          yield* events.append(
            [...expiredEvents, ...done.events, ...crossingEvents(thresholds, before, after)].map((event) => ({
              account,
              event
            }))
          )
          return done.value
        }))

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
      // A new wallet has no grant to expire.
      return JSON.stringify({ ...encodedWallet(yield* get(account)), next_expiry: null })
    })

    /**
     * PUT /developer/account/wallet: version, then budget floor, then the budget_set entry (D6).
     * The floor counts the live grants' free amounts (D21): the total less them is the base,
     * which must still cover what the base holds and spent.
     */
    const setBudget = Effect.fn("Wallets.setBudget")(function*(account: Account, input: SetBudgetInput) {
      return yield* withGrants(account, ({ book, ledger }) =>
        Effect.gen(function*() {
          const wallet = yield* ledger.wallet
          if (wallet.version !== (input.expected_version ?? 0)) {
            return yield* new VersionConflict({
              detail: "The wallet was changed by another writer; read it again and decide again.",
              current_version: wallet.version
            })
          }
          const free = Money.sum(book.all().filter((grant) => grant.state === "live").map(freeOf))
          const committed = wallet.reserved_usd.plus(wallet.spent_usd).plus(free)
          if (input.budget_usd.lt(committed)) {
            return yield* new BudgetBelowCommitted({
              detail: `The budget cannot be lower than what is spent and reserved plus the live grants' free amounts (${
                Money.format(committed)
              }).`,
              minimum_budget_usd: committed
            })
          }
          const moved = yield* ledger.move({
            kind: "budget_set",
            budget_usd: input.budget_usd,
            note: input.note,
            idempotency_key: input.idempotency_key
          })
          return {
            value: moved.wallet,
            events: [{ type: "wallet.budget_set", data: { entry: moved.entry, wallet: moved.wallet } }]
          }
        }))
    })

    /**
     * POST /developer/account/wallet/credits: a grant (D21), added to the budget with its
     * credit_added entry (D6). Its expiry is judged by the transaction's time.
     */
    const addCredit = Effect.fn("Wallets.addCredit")(function*(account: Account, input: AddCreditInput) {
      return yield* withGrants(account, ({ ledger, now }) =>
        Effect.gen(function*() {
          const expiresAt = input.expires_at === undefined ? null : DateTime.toDate(input.expires_at)
          if (expiresAt !== null && expiresAt.getTime() <= now.getTime()) {
            return yield* ValidationFailed.at("#/expires_at", "must be after now")
          }
          const latest = new Date(now)
          latest.setUTCFullYear(latest.getUTCFullYear() + MAX_EXPIRY_YEARS)
          if (expiresAt !== null && expiresAt.getTime() > latest.getTime()) {
            return yield* ValidationFailed.at("#/expires_at", `must be at most ${MAX_EXPIRY_YEARS} years ahead`)
          }
          const wallet = yield* ledger.wallet
          if (wallet.budget_usd.plus(input.amount_usd).gt(Money.max)) {
            return yield* ValidationFailed.at(
              "#/amount_usd",
              `would raise the budget above ${Money.format(Money.max)}`
            )
          }
          const grantId = randomUUID()
          const moved = yield* ledger.move({
            kind: "credit_added",
            amount_usd: input.amount_usd,
            note: input.note,
            idempotency_key: input.idempotency_key,
            grants: [{ grant_id: grantId, amount: input.amount_usd }]
          })
          const row: GrantRow = {
            id: grantId,
            wallet_id: wallet.id,
            entry_id: moved.entry.id,
            amount_usd: input.amount_usd,
            drawn_usd: Money.zero,
            held_usd: Money.zero,
            ended_usd: Money.zero,
            priority: input.priority ?? DEFAULT_PRIORITY,
            category: input.category ?? DEFAULT_CATEGORY,
            expires_at: input.expires_at ?? null,
            state: "live",
            note: input.note ?? null,
            created_at: ledger.time,
            warned_days: null
          }
          const balance = balanceOf(row)
          yield* grantsRepo.insert({
            id: grantId,
            wallet_id: wallet.id,
            entry_id: moved.entry.id,
            balance,
            note: row.note
          })
          return {
            value: new CreditAdded({ ...moved.wallet, grant: grantView(row, balance) }),
            events: [{ type: "wallet.credit_added", data: { entry: moved.entry, wallet: moved.wallet } }]
          }
        }))
    })

    /**
     * POST /developer/account/wallet/grants/{id}/void (D21): a live grant ends at once as expiry
     * ends it, with a credit_voided entry (a person's budget decision: the version moves).
     */
    const voidGrant = Effect.fn("Wallets.voidGrant")(function*(
      account: Account,
      grantId: string,
      input: VoidGrantInput
    ) {
      return yield* withGrants(account, ({ book, ledger, rows }) =>
        Effect.gen(function*() {
          const wallet = yield* ledger.wallet
          const notFound = new GrantNotFound({ detail: `No grant ${grantId} of this account.` })
          if (!isUuid(grantId)) return yield* notFound
          const moving = book.all().find((grant) => grant.id === grantId.toLowerCase())
          if (moving === undefined || moving.state !== "live") {
            const row = rows.get(grantId.toLowerCase()) ?? Option.getOrUndefined(
              yield* grantsRepo.byId({ wallet_id: wallet.id, id: grantId })
            )
            if (row === undefined) return yield* notFound
            const state = moving?.state ?? row.state
            return yield* new GrantNotLive({ detail: `The grant is ${state}; only a live grant can be voided.`, state })
          }
          const ending = book.end(moving.id, "credit_voided")
          const row = rows.get(moving.id)
          const balance = book.all().find((grant) => grant.id === moving.id)
          if (ending === undefined || row === undefined || balance === undefined) {
            return yield* Effect.dieMessage(`grant ${moving.id} vanished from its own transaction`)
          }
          const moved = yield* ledger.move({
            ...endingMovement(ending),
            note: input.note,
            idempotency_key: input.idempotency_key
          })
          const grant = grantView(row, balance)
          return { value: grant, events: [{ type: "grant.voided", data: { grant, entry: moved.entry } }] }
        }))
    })

    /**
     * GET /developer/account/wallet/grants (D21): live grants in draw-down order, ended ones newest
     * first. A grant past its time shows as expired already, as the wallet read counts it.
     */
    const listGrants = Effect.fn("Wallets.listGrants")(function*(
      account: Account,
      state: "live" | "ended" | "all"
    ) {
      const wallet = yield* repo.findWallet(account)
      if (Option.isNone(wallet)) return new GrantList({ grants: [] })
      const rows = yield* grantsRepo.all({ wallet_id: wallet.value.id, live: true, ended: true })
      const book = makeGrantBook(rows.map(balanceOf))
      book.expireDue(DateTime.toDate(yield* DateTime.now))
      const byId = new Map(rows.map((row) => [row.id, row]))
      const shown = (balances: ReadonlyArray<GrantBalance>) =>
        balances.flatMap((balance) => {
          const row = byId.get(balance.id)
          return row === undefined ? [] : [grantView(row, balance)]
        })
      const all = book.all()
      const live = shown(all.filter((grant) => grant.state === "live"))
      const ended = shown(
        all.filter((grant) => grant.state !== "live").sort((a, b) =>
          b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : -1)
        )
      )
      return new GrantList({ grants: state === "live" ? live : state === "ended" ? ended : [...live, ...ended] })
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
      voidGrant,
      listGrants,
      ledger,
      ledgerJson,
      asOf,
      findId,
      sessionEntries,
      fundedSessions,
      exportLedger
    } as const
  }),
  dependencies: [WalletLedger.Default, WalletsRepo.Default, GrantsRepo.Default, Events.Default]
}) {}
