import { SqlClient } from "@effect/sql"
import { isLockTimeout, isSqlError, isUniqueViolation } from "./Sql/Errors.js"
import { Effect, Either, Option, Ref, Schema } from "effect"
import { type Account, isUuid } from "./Domain/Account.js"
import { Unavailable, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import * as Money from "./Domain/Money.js"
import {
  BudgetBelowCommitted,
  IdempotencyInProgress,
  IdempotencyKeyReused,
  LedgerEntry,
  LedgerEntryNotFound,
  LedgerPage,
  Wallet
} from "./Domain/Wallet.js"
import { applyMovement, available, type Balances, type Movement } from "./Domain/Movement.js"
import { type LedgerEntryRow, type NewLedgerEntry, WalletRow, WalletsRepo, type WalletUpdate } from "./Wallets/Repo.js"

export type { Balances, BudgetSet, CreditAdded, Movement, Reserve, ReserveRelease, Spend } from "./Domain/Movement.js"

/** A movement written: its ledger entry and the wallet right after it. */
export interface Moved {
  readonly entry: LedgerEntry
  readonly wallet: Wallet
}

/**
 * The only way money moves: a wallet locked (`SELECT ... FOR UPDATE`) for the
 * rest of the transaction `Wallets.withLock` opened, and a writer that appends
 * ledger entries to it. Several movements may be written under one lock, each
 * with its own entry and consecutive sequence; they commit together.
 */
export interface LedgerWriter {
  /** The wallet as this transaction has left it so far; rules are checked against this. */
  readonly wallet: Effect.Effect<Wallet>
  /** Writes one movement: updates the wallet and appends its entry (one statement). */
  readonly move: (movement: Movement) => Effect.Effect<Moved>
  /**
   * Writes movements in order, each with its own entry: one statement updates
   * the wallet and appends the entries, however many movements there are.
   */
  readonly moveAll: (movements: ReadonlyArray<Movement>) => Effect.Effect<ReadonlyArray<Moved>>
}

/**
 * The wallets one transaction holds locked (`Wallets.withLocks`): a writer per
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

/** A budget decision by a person (D6); `expected_version` omitted means "I expect 0". */
export interface SetBudgetInput {
  readonly budget_usd: Money.Decimal
  readonly expected_version?: number | undefined
  readonly note?: string | undefined
}

export interface AddCreditInput {
  readonly amount_usd: Money.Decimal
  readonly note?: string | undefined
}

/** An idempotency key and what it is being used for (D6). */
export interface IdempotencyClaim {
  readonly key: string
  /** The endpoint, e.g. `PUT /developer/account/wallet`: the same key on another endpoint is another request. */
  readonly endpoint: string
  /** From `requestFingerprint`: the amount as a number and the note. */
  readonly fingerprint: string
}

/** What an idempotent mutation answers: its own result, or the first success under its key, replayed. */
export type IdempotentOutcome =
  | { readonly _tag: "Applied"; readonly wallet: Wallet }
  | { readonly _tag: "Replayed"; readonly status: number; readonly body: unknown }

const walletBusy = () =>
  new Unavailable({
    detail: "The wallet is busy with another change; nothing was applied. Retry with backoff.",
    retry_after_seconds: 2
  })

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

const walletOf = (row: WalletRow): Wallet =>
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

const entryOf = (row: LedgerEntryRow): LedgerEntry => new LedgerEntry({ ...row, payment_provider: null }, trusted)

/** A wallet's movements turned into its entries and the balances it is left with, before anything is written. */
interface AppendPlan {
  readonly before: WalletRow
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
const planAppend = (before: WalletRow, movements: ReadonlyArray<Movement>): Either.Either<AppendPlan | undefined, string> =>
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
        note: applied.note
      })
      snapshots.push({
        balancesRow: { budget_usd: after.budget, reserved_usd: after.reserved, spent_usd: after.spent },
        version,
        enforced
      })
    }
    return {
      before,
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

/** The account-wide wallet: reads, budget decisions, credits, the ledger, and the primitive every movement uses. */
export class Wallets extends Effect.Service<Wallets>()("Wallets", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* WalletsRepo

    /** The wallet of an account, created on first read (D6): version 0, zeros, not enforced. */
    const get = Effect.fn("Wallets.get")(function*(account: Account) {
      const found = yield* repo.findWallet(account).pipe(Effect.orDie)
      if (Option.isSome(found)) return walletOf(found.value)
      yield* repo.insertWalletsIfAbsent([account]).pipe(Effect.orDie)
      const created = yield* repo.findWallet(account).pipe(Effect.orDie)
      return yield* Option.match(created, {
        onNone: () => Effect.dieMessage(`the wallet of ${account.kind} ${account.id} vanished after its creation`),
        onSome: (row) => Effect.succeed(walletOf(row))
      })
    })

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
          return yield* Effect.dieMessage(`a wallet of ${missing.map((a) => `${a.kind} ${a.id}`).join(", ")} vanished after its creation`)
        }
        return all
      }).pipe(
        Effect.catchIf(isSqlError, (error) => isLockTimeout(error) ? Effect.fail(walletBusy()) : Effect.die(error)),
        Effect.catchTag("ParseError", Effect.die)
      )

    /** Writers for wallets locked by the current transaction, sharing its one connection. */
    const ledgersFor = (locked: ReadonlyArray<WalletRow>, open: Ref.Ref<boolean>): Effect.Effect<Ledgers> =>
      Effect.gen(function*() {
        const state = yield* Ref.make(new Map(locked.map((row) => [row.account_id, row])))
        // One connection: movements from concurrent fibers are written one statement at a time.
        const turn = yield* Effect.makeSemaphore(1)
        const moveEach = (writes: ReadonlyArray<readonly [Account, ReadonlyArray<Movement>]>) =>
          Effect.gen(function*() {
            if (!(yield* Ref.get(open))) {
              return yield* Effect.dieMessage("a LedgerWriter was used after its transaction ended")
            }
            const rows = yield* Ref.get(state)
            const plans: Array<AppendPlan | undefined> = []
            for (const [account, movements] of writes) {
              const before = rows.get(account.id)
              if (before === undefined) {
                return yield* Effect.dieMessage(`the wallet of ${account.kind} ${account.id} is not locked by this transaction`)
              }
              const plan = planAppend(before, movements)
              if (Either.isLeft(plan)) {
                return yield* Effect.dieMessage(`refused to write an inconsistent ledger entry: ${plan.left}`)
              }
              plans.push(plan.right)
            }
            const writing = plans.filter((plan): plan is AppendPlan => plan !== undefined)
            if (writing.length === 0) return writes.map(() => [])
            const appended = yield* repo.appendEntries({
              wallets: writing.map((plan) => plan.update),
              entries: writing.flatMap((plan) => plan.entries)
            })
            const byEntry = new Map(appended.map((row) => [`${row.wallet_id}:${row.sequence}`, row]))
            const next = new Map(rows)
            const written: Array<ReadonlyArray<Moved>> = []
            for (const plan of plans) {
              if (plan === undefined) {
                written.push([])
                continue
              }
              const entryRows = plan.entries.map((entry) => byEntry.get(`${entry.wallet_id}:${entry.sequence}`))
              const [first] = entryRows
              if (first === undefined || entryRows.some((row) => row === undefined)) {
                return yield* Effect.dieMessage(`wallet ${plan.before.id} changed under its lock; nothing was written`)
              }
              const { budget_usd, enforced, last_sequence, reserved_usd, spent_usd, version } = plan.update
              const updated = new WalletRow({
                ...plan.before,
                budget_usd,
                reserved_usd,
                spent_usd,
                enforced,
                version,
                last_sequence,
                updated_at: first.created_at
              }, trusted)
              next.set(updated.account_id, updated)
              written.push(entryRows.flatMap((row, i) => {
                const snapshot = plan.snapshots[i]
                const planned = plan.entries[i]
                if (row === undefined || snapshot === undefined || planned === undefined) return []
                const { wallet_id: _, ...fields } = planned
                return [{
                  entry: entryOf({ ...fields, id: row.id, created_at: row.created_at }),
                  wallet: walletOf({ ...updated, ...snapshot.balancesRow, version: snapshot.version, enforced: snapshot.enforced })
                }]
              }))
            }
            yield* Ref.set(state, next)
            return written
          }).pipe(Effect.orDie, turn.withPermits(1), Effect.withSpan("Wallets.moveEach"))

        const writerOf = (row: WalletRow): LedgerWriter => {
          const account = { kind: row.account_kind, id: row.account_id }
          const moveAll = (movements: ReadonlyArray<Movement>) =>
            Effect.map(moveEach([[account, movements]]), ([moved]) => moved ?? [])
          return {
            wallet: Effect.flatMap(Ref.get(state), (rows) => {
              const current = rows.get(row.account_id)
              return current === undefined ? Effect.dieMessage(`wallet ${row.id} is not locked`) : Effect.succeed(walletOf(current))
            }),
            moveAll,
            move: (movement) =>
              Effect.flatMap(moveAll([movement]), ([moved]) =>
                moved === undefined ? Effect.dieMessage("a movement wrote no entry") : Effect.succeed(moved))
          }
        }
        return { writers: new Map(locked.map((row) => [row.account_id, writerOf(row)])), moveEach }
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
      }).pipe(
        sql.withTransaction,
        Effect.catchIf(isSqlError, Effect.die),
        Effect.withSpan("Wallets.withLocks")
      )

    /** `withLocks` for one wallet, with its writer. */
    const withLock = <A, E, R>(
      account: Account,
      use: (ledger: LedgerWriter) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | Unavailable, R> =>
      withLocks([account], (ledgers) => {
        const ledger = ledgers.writers.get(account.id)
        return ledger === undefined ? Effect.dieMessage(`the wallet of ${account.kind} ${account.id} is not locked`) : use(ledger)
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
          const moved = yield* ledger.move({ kind: "budget_set", budget_usd: input.budget_usd, note: input.note })
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
          const moved = yield* ledger.move({ kind: "credit_added", amount_usd: input.amount_usd, note: input.note })
          return moved.wallet
        }))
    })

    /**
     * Runs a wallet mutation at most once per (account, key) (D6). In one
     * transaction: claims the key without waiting (409 in progress while
     * another request holds it), replays the recorded first success of the
     * same request, refuses another request under a used key, else runs
     * `mutation` and records its result. A failure rolls back the mutation and
     * records nothing, so a retry runs again.
     */
    const idempotently = <E, R>(
      account: Account,
      claim: IdempotencyClaim,
      mutation: Effect.Effect<Wallet, E, R>
    ): Effect.Effect<IdempotentOutcome, E | IdempotencyInProgress | IdempotencyKeyReused, R> =>
      Effect.gen(function*() {
        const { claimed } = yield* repo.tryClaimKey({ account, key: claim.key }).pipe(Effect.orDie)
        if (!claimed) {
          return yield* new IdempotencyInProgress({
            detail: "A request with this idempotency_key is still being processed; retry in a moment."
          })
        }
        const record = yield* repo.findIdempotencyRecord({ account, key: claim.key }).pipe(Effect.orDie)
        if (Option.isSome(record)) {
          if (record.value.endpoint === claim.endpoint && record.value.request_fingerprint === claim.fingerprint) {
            return { _tag: "Replayed", status: record.value.response_status, body: record.value.response_body } as const
          }
          return yield* new IdempotencyKeyReused({
            detail: "This idempotency_key was used for a different request; a new action needs a new key."
          })
        }
        const wallet = yield* mutation
        const body = yield* Schema.encode(Wallet)(wallet).pipe(Effect.orDie)
        yield* repo.insertIdempotencyRecord({
          account,
          key: claim.key,
          endpoint: claim.endpoint,
          request_fingerprint: claim.fingerprint,
          response_status: 200,
          response_body: JSON.stringify(body)
        }).pipe(
          // Unreachable while the key is claimed, but a unique violation on a key
          // is a duplicate, never a 500.
          Effect.catchIf(
            (error) => isSqlError(error) && isUniqueViolation(error),
            () => new IdempotencyInProgress({ detail: "A request with this idempotency_key was processed meanwhile; retry." })
          ),
          Effect.orDie
        )
        return { _tag: "Applied", wallet } as const
      }).pipe(
        sql.withTransaction,
        Effect.catchIf(isSqlError, Effect.die),
        Effect.withSpan("Wallets.idempotently")
      )

    /** A page of the ledger, newest first (D7); `before` must be an entry of this account's wallet. */
    const ledger = Effect.fn("Wallets.ledger")(function*(
      account: Account,
      page: { readonly before: Option.Option<string>; readonly limit: number }
    ) {
      const notFound = () =>
        new LedgerEntryNotFound({ detail: "No ledger entry of this account has the id given as before." })
      const wallet = yield* repo.findWallet(account).pipe(Effect.orDie)
      if (Option.isNone(wallet)) {
        return yield* Option.isSome(page.before) ? Effect.fail(notFound()) : Effect.succeed(
          new LedgerPage({ entries: [], next_before: null })
        )
      }
      let beforeSequence: number | null = null
      if (Option.isSome(page.before)) {
        const found = isUuid(page.before.value)
          ? yield* repo.findEntrySequence({ wallet_id: wallet.value.id, id: page.before.value }).pipe(Effect.orDie)
          : Option.none()
        if (Option.isNone(found)) return yield* notFound()
        beforeSequence = found.value.sequence
      }
      const rows = yield* repo.pageEntries({
        wallet_id: wallet.value.id,
        before_sequence: beforeSequence,
        limit: page.limit + 1
      }).pipe(Effect.orDie)
      const entries = rows.slice(0, page.limit).map(entryOf)
      const last = entries[entries.length - 1]
      return new LedgerPage(
        { entries, next_before: rows.length > page.limit && last !== undefined ? last.id : null },
        trusted
      )
    })

    return { get, setBudget, addCredit, idempotently, ledger, withLock, withLocks } as const
  }),
  dependencies: [WalletsRepo.Default]
}) {}
