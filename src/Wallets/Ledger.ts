import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Either, Ref } from "effect"
import { randomUUID } from "node:crypto"
import type { Account } from "../Domain/Account.js"
import { Unavailable } from "../Domain/Errors.js"
import { shownLabels } from "../Domain/Labels.js"
import { applyMovement, available, type Balances, type GrantPart, type Movement } from "../Domain/Movement.js"
import { LedgerEntry, Wallet } from "../Domain/Wallet.js"
import { inTransaction } from "../Sql/Errors.js"
import {
  type LedgerEntryRow,
  type LockedWalletRow,
  type NewLedgerEntry,
  WalletRow,
  WalletsRepo,
  type WalletUpdate
} from "./Repo.js"

/** A movement written: its ledger entry and the wallet right after it. */
export interface Moved {
  readonly entry: LedgerEntry
  readonly wallet: Wallet
}

/**
 * The only way money moves: a wallet locked (`SELECT ... FOR UPDATE`) for the
 * rest of the transaction `WalletLedger.withLock` opened, and a writer that appends
 * ledger entries to it. Several movements may be written under one lock, each
 * with its own entry and consecutive sequence; they commit together.
 */
export interface LedgerWriter {
  /** The wallet as this transaction has left it so far; rules are checked against this. */
  readonly wallet: Effect.Effect<Wallet>
  /** The transaction's `now()`: the time every row it writes carries, and every bound it judges is judged by. */
  readonly time: DateTime.Utc
  /** Writes one movement: updates the wallet and appends its entry (one statement). */
  readonly move: (movement: Movement) => Effect.Effect<Moved>
  /**
   * Writes movements in order, each with its own entry: one statement updates
   * the wallet and appends the entries, however many movements there are.
   */
  readonly moveAll: (movements: ReadonlyArray<Movement>) => Effect.Effect<ReadonlyArray<Moved>>
}

/**
 * The wallets one transaction holds locked (`WalletLedger.withLocks`): a writer per
 * wallet, by account id, and `moveEach`, which writes the movements of several
 * wallets as their writers' `moveAll` would, in one statement for all of them.
 */
export interface Ledgers {
  readonly writers: ReadonlyMap<string, LedgerWriter>
  /** One list of what was written per write, in order. */
  readonly moveEach: (
    writes: ReadonlyArray<readonly [Account, ReadonlyArray<Movement>]>
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<Moved>>>
}

const walletBusy = () =>
  new Unavailable({
    detail: "The wallet is busy with another change; nothing was applied. Retry with backoff.",
    retry_after_seconds: 2
  })

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

export const walletOf = (row: WalletRow): Wallet =>
  new Wallet({
    id: row.id,
    owner_kind: row.account_kind,
    owner_id: row.account_id,
    currency: "USD",
    budget_usd: row.budget_usd,
    reserved_usd: row.reserved_usd,
    spent_usd: row.spent_usd,
    available_usd: available({ budget: row.budget_usd, reserved: row.reserved_usd, spent: row.spent_usd }),
    enforced: row.enforced,
    version: row.version,
    created_at: row.created_at,
    updated_at: row.updated_at
  }, trusted)

/** A grant's part as an entry shows it (D21): which grant and how much. */
const shownGrant = (part: GrantPart) => ({ grant_id: part.grant_id, amount_usd: part.amount })

export const entryOf = (row: LedgerEntryRow): LedgerEntry =>
  new LedgerEntry({ ...row, payment_provider: null }, trusted)

/** A wallet's movements turned into its entries and the balances it is left with, before anything is written. */
interface AppendPlan {
  readonly update: WalletUpdate
  readonly entries: ReadonlyArray<NewLedgerEntry>
  /** The wallet right after each entry. */
  readonly snapshots: ReadonlyArray<{
    readonly balancesRow: Pick<WalletRow, "budget_usd" | "reserved_usd" | "spent_usd">
    readonly version: number
    readonly enforced: boolean
  }>
}

/**
 * Applies the movements in order to a locked wallet, each with the next
 * sequence; undefined for none, or why one would corrupt the books.
 */
const planAppend = (
  before: WalletRow,
  movements: ReadonlyArray<Movement>
): Either.Either<AppendPlan | undefined, string> =>
  Either.gen(function*() {
    if (movements.length === 0) return undefined
    let balances: Balances = { budget: before.budget_usd, reserved: before.reserved_usd, spent: before.spent_usd }
    let version = before.version
    let enforced = before.enforced
    let sequence = before.last_sequence
    const entries: Array<NewLedgerEntry> = []
    const snapshots: Array<AppendPlan["snapshots"][number]> = []
    for (const movement of movements) {
      const applied = yield* applyMovement(balances, movement)
      const { after } = applied
      sequence += 1
      if (applied.isBudgetDecision) {
        version += 1
        enforced = true
      }
      balances = after
      entries.push({
        id: randomUUID(),
        wallet_id: before.id,
        sequence,
        kind: applied.kind,
        amount_usd: applied.amount,
        budget_after_usd: after.budget,
        reserved_after_usd: after.reserved,
        spent_after_usd: after.spent,
        available_after_usd: available(after),
        session_id: applied.session_id,
        task_id: applied.task_id,
        note: applied.note,
        repository_id: applied.repository_id,
        user_id: applied.user_id,
        model: applied.model,
        labels: shownLabels(applied.labels),
        idempotency_key: applied.idempotency_key,
        grants: applied.grants
      })
      snapshots.push({
        balancesRow: { budget_usd: after.budget, reserved_usd: after.reserved, spent_usd: after.spent },
        version,
        enforced
      })
    }
    return {
      update: {
        id: before.id,
        read_sequence: before.last_sequence,
        budget_usd: balances.budget,
        reserved_usd: balances.reserved,
        spent_usd: balances.spent,
        enforced,
        version,
        last_sequence: sequence
      },
      entries,
      snapshots
    }
  })

/** Movements appended to a wallet, before anything is written: its new row, the entries, and each as written. */
export interface Appended {
  readonly update: WalletUpdate
  readonly entries: ReadonlyArray<NewLedgerEntry>
  readonly moved: ReadonlyArray<Moved>
  /** The wallet's row after the last movement, stamped with `time`. */
  readonly after: WalletRow
}

/**
 * Movements applied in order to a wallet as it was read, each with the next sequence, stamped
 * with the time of the transaction that writes them: undefined for none, or why one would
 * corrupt the books. The one builder of entries: the ledger's own writes and the settlement
 * batch's (src/Settlement/Transition.ts) both append what it built.
 */
export const appendTo = (
  before: WalletRow,
  movements: ReadonlyArray<Movement>,
  time: DateTime.Utc
): Either.Either<Appended | undefined, string> =>
  Either.map(planAppend(before, movements), (plan) => {
    if (plan === undefined) return undefined
    const { budget_usd, enforced, last_sequence, reserved_usd, spent_usd, version } = plan.update
    const after = new WalletRow({
      ...before,
      budget_usd,
      reserved_usd,
      spent_usd,
      enforced,
      version,
      last_sequence,
      updated_at: time
    }, trusted)
    const moved = plan.entries.flatMap(({ grants, idempotency_key: _key, wallet_id: _wallet, ...fields }, i) => {
      const snapshot = plan.snapshots[i]
      if (snapshot === undefined) return []
      return [{
        entry: entryOf({ ...fields, grants: grants.map(shownGrant), created_at: time }),
        wallet: walletOf({ ...after, ...snapshot.balancesRow, version: snapshot.version, enforced: snapshot.enforced })
      }]
    })
    return { update: plan.update, entries: plan.entries, moved, after }
  })

/**
 * The only way money moves (D6–D8): wallets locked in one transaction, and a
 * writer per wallet that appends ledger entries and keeps the row in step.
 * Budget decisions (Wallets) and settlement (Settlement) both write through it.
 */
export class WalletLedger extends Effect.Service<WalletLedger>()("Wallets/Ledger", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* WalletsRepo

    /**
     * Locks the accounts' wallet rows, creating the wallets that do not exist
     * yet; 503 past the lock timeout. Wallets in the order of their ids.
     */
    const lockWallets = (accounts: ReadonlyArray<Account>) =>
      Effect.gen(function*() {
        const locked = yield* repo.lockWallets(accounts)
        const missing = accounts.filter((account) => !locked.some((row) => row.account_id === account.id))
        if (missing.length === 0) return locked
        // The insert can wait too, on a concurrent first insert of the same wallet.
        yield* repo.limitLockWaits
        yield* repo.insertWalletsIfAbsent(missing)
        const all = yield* repo.lockWallets(accounts)
        if (all.length < accounts.length) {
          return yield* Effect.dieMessage(
            `a wallet of ${missing.map((a) => `${a.kind} ${a.id}`).join(", ")} vanished after its creation`
          )
        }
        return all
      }).pipe(Effect.catchTag("WalletLocked", () => Effect.fail(walletBusy())))

    /** Writers for wallets locked by the current transaction, sharing its one connection. */
    const ledgersFor = (
      locked: ReadonlyArray<LockedWalletRow>,
      open: Ref.Ref<boolean>
    ): Effect.Effect<Ledgers> =>
      Effect.gen(function*() {
        const state = yield* Ref.make<ReadonlyMap<string, WalletRow>>(
          new Map(locked.map(({ transaction_time: _time, ...row }) => [row.account_id, new WalletRow(row, trusted)]))
        )
        // The transaction's `now()`: every row it writes carries this time. (No wallet, no write.)
        const time = locked[0]?.transaction_time ?? DateTime.unsafeNow()
        // One connection: movements from concurrent fibers are written one statement at a time.
        const turn = yield* Effect.makeSemaphore(1)

        const moveEach = Effect.fn("WalletLedger.moveEach")(
          function*(writes: ReadonlyArray<readonly [Account, ReadonlyArray<Movement>]>) {
            if (!(yield* Ref.get(open))) {
              return yield* Effect.dieMessage("a LedgerWriter was used after its transaction ended")
            }
            const rows = yield* Ref.get(state)
            const next = new Map(rows)
            const moved: Array<ReadonlyArray<Moved>> = []
            const updates: Array<WalletUpdate> = []
            const entries: Array<NewLedgerEntry> = []
            for (const [account, movements] of writes) {
              const before = rows.get(account.id)
              if (before === undefined) {
                return yield* Effect.dieMessage(
                  `the wallet of ${account.kind} ${account.id} is not locked by this transaction`
                )
              }
              const appended = appendTo(before, movements, time)
              if (Either.isLeft(appended)) {
                return yield* Effect.dieMessage(`refused to write an inconsistent ledger entry: ${appended.left}`)
              }
              if (appended.right === undefined) {
                moved.push([])
                continue
              }
              next.set(account.id, appended.right.after)
              updates.push(appended.right.update)
              entries.push(...appended.right.entries)
              moved.push(appended.right.moved)
            }
            if (entries.length === 0) return moved
            const added = yield* repo.appendEntries({ wallets: updates, entries })
            if (added !== entries.length) {
              return yield* Effect.dieMessage(
                `a wallet changed under its lock: ${added} of ${entries.length} entries written`
              )
            }
            yield* Ref.set(state, next)
            return moved
          },
          turn.withPermits(1)
        )

        const writerOf = (row: WalletRow): LedgerWriter => {
          const account = { kind: row.account_kind, id: row.account_id }
          const moveAll = (movements: ReadonlyArray<Movement>) =>
            Effect.map(moveEach([[account, movements]]), ([moved]) => moved ?? [])
          return {
            time,
            wallet: Effect.flatMap(Ref.get(state), (rows) => {
              const current = rows.get(row.account_id)
              return current === undefined
                ? Effect.dieMessage(`wallet ${row.id} is not locked`)
                : Effect.succeed(walletOf(current))
            }),
            moveAll,
            move: (movement) =>
              Effect.flatMap(
                moveAll([movement]),
                ([moved]) =>
                  moved === undefined ? Effect.dieMessage("a movement wrote no entry") : Effect.succeed(moved)
              )
          }
        }
        return {
          writers: new Map(locked.map((row) => [row.account_id, writerOf(row)])),
          moveEach
        }
      })

    /**
     * Runs `use` in a transaction holding the rows of the accounts' wallets
     * (locked in the order of their ids, waiting at most 2 s, else 503
     * `unavailable`), with a writer for each and one for all at once. Inside an
     * outer transaction it joins it (as a savepoint), so callers can record
     * their own facts atomically with the movements. A failure of `use` rolls
     * every movement back.
     */
    const withLocks = <A, E, R>(
      accounts: ReadonlyArray<Account>,
      use: (ledgers: Ledgers) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | Unavailable, R> =>
      Effect.gen(function*() {
        const unique = [...new Map(accounts.map((account) => [account.id, account])).values()]
        const locked = yield* lockWallets(unique)
        const open = yield* Ref.make(true)
        const ledgers = yield* ledgersFor(locked, open)
        return yield* use(ledgers).pipe(Effect.ensuring(Ref.set(open, false)))
      }).pipe(inTransaction(sql), Effect.withSpan("WalletLedger.withLocks"))

    /** `withLocks` for one wallet, with its writer. */
    const withLock = <A, E, R>(
      account: Account,
      use: (ledger: LedgerWriter) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | Unavailable, R> =>
      withLocks([account], (ledgers) => {
        const ledger = ledgers.writers.get(account.id)
        return ledger === undefined
          ? Effect.dieMessage(`the wallet of ${account.kind} ${account.id} is not locked`)
          : use(ledger)
      })

    return { withLocks, withLock } as const
  }),
  dependencies: [WalletsRepo.Default]
}) {}
