import { Data, Effect, Option, Stream } from "effect"
import { BooksRepo, type EntryBooks, type GrantDrift, type WalletBooks } from "./Books/Repo.js"
import { isUuid } from "./Domain/Account.js"
import * as Money from "./Domain/Money.js"

/** Operator-facing (CLI): an account that has no wallet to verify. */
export class BooksError extends Data.TaggedError("BooksError")<{ readonly message: string }> {}

/** One thing the ledger says that the books do not bear out (D13). */
export interface Mismatch {
  readonly wallet_id: string
  readonly account_id: string
  /**
   * What was checked: an entry's sequence or balances, the wallet row, a session's sums, a running
   * spend total (D16), a scope key's counter, or a grant (D21): its row against its entries
   * (`grant`), its held amount against its sessions' earmarks (`grant_earmarks`), and the wallet's
   * grants' budget, holds and drawn amounts summed, each at most the wallet's own (`grant_totals`).
   */
  readonly check:
    | "sequence"
    | "entry_balances"
    | "wallet_row"
    | "session"
    | "sessions_held"
    | "spend_totals"
    | "scope_counters"
    | "grant"
    | "grant_earmarks"
    | "grant_totals"
  /** A counter by scope key (D16, "A limit's use by scope key"): its key, and its day (null for the open holds). */
  readonly counter?: { readonly scope: string; readonly scope_key: string; readonly day: string | null }
  readonly sequence?: number
  readonly session_id?: string
  /** The grant (D21) a `grant` or `grant_earmarks` mismatch is about. */
  readonly grant_id?: string
  /**
   * A running total's group: its UTC day, repository and user (D16), model and labels (D19). The
   * drift check compares money per day, repository and user, over every model and labels of them,
   * so its groups name no model and no labels.
   */
  readonly group?: {
    readonly day: string
    readonly repository_id: string | null
    readonly user_id: string | null
    readonly model?: string | null
    readonly labels?: Readonly<Record<string, string>>
  }
  readonly expected: unknown
  readonly found: unknown
}

export interface Verdict {
  readonly wallets: number
  readonly entries: number
  readonly mismatches: ReadonlyArray<Mismatch>
}

/**
 * The drift check's answer (D19): how many wallet rows, running-total groups and grants (D21)
 * disagree with the entries (`account_api_books_drift`), and the first of them, as `verify` names them.
 */
export interface Drift {
  readonly count: number
  readonly mismatches: ReadonlyArray<Mismatch>
}

interface Balances {
  readonly budget: Money.Decimal
  readonly reserved: Money.Decimal
  readonly spent: Money.Decimal
}

const ZERO: Balances = { budget: Money.zero, reserved: Money.zero, spent: Money.zero }

/** Only this many mismatches are listed per wallet: damaged books must not fill the operator's memory either. */
const LISTED_PER_WALLET = 100
/** And this many of each kind by the drift check, however many it counts. */
const LISTED_DRIFT = 100

const afterOf = (entry: EntryBooks): Balances => ({
  budget: Money.decimal(entry.budget_after_usd),
  reserved: Money.decimal(entry.reserved_after_usd),
  spent: Money.decimal(entry.spent_after_usd)
})

const formatted = (balances: Balances) => ({
  budget_usd: Money.format(balances.budget),
  reserved_usd: Money.format(balances.reserved),
  spent_usd: Money.format(balances.spent)
})

const same = (a: Balances, b: Balances) => a.budget.eq(b.budget) && a.reserved.eq(b.reserved) && a.spent.eq(b.spent)

/**
 * Whether an entry's after-balances follow from the balances before it and its movement (D6–D8):
 * `None` when they do, else the balances they should have been. A spend draws from the hold
 * whatever part of it the hold covered (from none to all of it) and the rest is charged directly,
 * so it is checked as: spent grows by the amount, the hold shrinks by at most the amount.
 */
export const expectedAfter = (before: Balances, entry: EntryBooks): Option.Option<Balances> => {
  const amount = Money.decimal(entry.amount_usd)
  const after = afterOf(entry)
  switch (entry.kind) {
    case "budget_set":
    case "credit_added": {
      const expected = { ...before, budget: before.budget.plus(amount) }
      return same(expected, after) ? Option.none() : Option.some(expected)
    }
    case "credit_expired":
    case "credit_voided": {
      const expected = { ...before, budget: before.budget.minus(amount) }
      return same(expected, after) ? Option.none() : Option.some(expected)
    }
    case "reserve": {
      const expected = { ...before, reserved: before.reserved.plus(amount) }
      return same(expected, after) ? Option.none() : Option.some(expected)
    }
    case "reserve_release": {
      const expected = { ...before, reserved: before.reserved.minus(amount) }
      return same(expected, after) ? Option.none() : Option.some(expected)
    }
    case "spend": {
      const drawn = before.reserved.minus(after.reserved)
      const reserved = drawn.gte(Money.zero) && drawn.lte(amount) ? after.reserved : before.reserved
      const expected = { budget: before.budget, reserved, spent: before.spent.plus(amount) }
      return same(expected, after) ? Option.none() : Option.some(expected)
    }
    default:
      return Option.some(before)
  }
}

/**
 * A grant whose row disagrees with its entries (D21), as `verify` and `drift` name it: what the
 * entries say (null when none names it) and what the row says (null when there is none). An ended
 * grant's row has its `ended_at` set and a live one's not; a used one's may be either.
 */
const grantMismatch = (grant: GrantDrift): Mismatch => ({
  wallet_id: grant.wallet_id,
  account_id: grant.account_id,
  check: "grant",
  grant_id: grant.grant_id,
  expected: grant.in_ledger
    ? {
      entry_id: grant.ledger_entry_id,
      amount_usd: grant.ledger_amount_usd,
      drawn_usd: grant.ledger_drawn_usd,
      held_usd: grant.ledger_held_usd,
      ended_usd: grant.ledger_ended_usd,
      state: grant.ledger_state,
      ended_at_set: grant.ledger_state === "used" ? grant.row_ended_at_set ?? true : grant.ledger_state !== "live"
    }
    : null,
  found: grant.row_state === null
    ? null
    : {
      entry_id: grant.row_entry_id,
      amount_usd: grant.row_amount_usd,
      drawn_usd: grant.row_drawn_usd,
      held_usd: grant.row_held_usd,
      ended_usd: grant.row_ended_usd,
      state: grant.row_state,
      ended_at_set: grant.row_ended_at_set
    }
})

/** Replays the books from the ledger and says where they disagree (D12 sums, D13, D21 grants). */
export class Books extends Effect.Service<Books>()("Books", {
  effect: Effect.gen(function*() {
    const repo = yield* BooksRepo

    /** One wallet: its entries streamed in order, each checked against the one before; then its row and its sessions. */
    const verifyWallet = (wallet: WalletBooks) =>
      Effect.gen(function*() {
        const found: Array<Mismatch> = []
        const report = (mismatch: Omit<Mismatch, "wallet_id" | "account_id">) => {
          if (found.length < LISTED_PER_WALLET) {
            found.push({ wallet_id: wallet.id, account_id: wallet.account_id, ...mismatch })
          }
        }
        // Each entry is checked against the recorded balances of the one before it, so one damaged
        // entry is reported where it is, not as every entry after it.
        const replayed = yield* Stream.runFold(
          repo.entries(wallet.id),
          { count: 0, sequence: 0, balances: ZERO },
          (state, entry) => {
            const sequence = Number(entry.sequence)
            if (sequence !== state.sequence + 1) {
              report({ check: "sequence", sequence, expected: state.sequence + 1, found: sequence })
            }
            Option.map(expectedAfter(state.balances, entry), (expected) =>
              report({
                check: "entry_balances",
                sequence,
                expected: formatted(expected),
                found: formatted(afterOf(entry))
              }))
            return { count: state.count + 1, sequence, balances: afterOf(entry) }
          }
        )
        const row = {
          balances: {
            budget: Money.decimal(wallet.budget_usd),
            reserved: Money.decimal(wallet.reserved_usd),
            spent: Money.decimal(wallet.spent_usd)
          },
          lastSequence: Number(wallet.last_sequence)
        }
        if (!same(row.balances, replayed.balances) || row.lastSequence !== replayed.sequence) {
          report({
            check: "wallet_row",
            expected: { ...formatted(replayed.balances), last_sequence: replayed.sequence },
            found: { ...formatted(row.balances), last_sequence: row.lastSequence }
          })
        }
        for (const session of yield* repo.sessionDisagreements(wallet.id)) {
          report({
            check: "session",
            session_id: session.session_id,
            expected: {
              held_usd: session.ledger_held_usd,
              spent_usd: session.ledger_spent_usd,
              unfunded_usd: session.ledger_unfunded_usd
            },
            found: session.row_held_usd === null
              ? null
              : {
                held_usd: session.row_held_usd,
                spent_usd: session.row_spent_usd,
                unfunded_usd: session.row_unfunded_usd
              }
          })
        }
        const held = Money.decimal(yield* repo.sessionsHeld(wallet.id))
        if (!held.eq(row.balances.reserved)) {
          report({ check: "sessions_held", expected: Money.format(row.balances.reserved), found: Money.format(held) })
        }
        for (const total of yield* repo.spendTotalDisagreements(wallet.id)) {
          const side = (spent: string | null, unfunded: string | null, sessions: number | null) =>
            spent === null ? null : { spent_usd: spent, unfunded_usd: unfunded, sessions }
          report({
            check: "spend_totals",
            group: {
              day: total.day,
              repository_id: total.repository_id,
              user_id: total.user_id,
              model: total.model,
              labels: total.labels
            },
            expected: side(total.ledger_spent_usd, total.ledger_unfunded_usd, total.ledger_sessions),
            found: side(total.row_spent_usd, total.row_unfunded_usd, total.row_sessions)
          })
        }
        for (const counter of yield* repo.scopeCounterDisagreements(wallet.id)) {
          report({
            check: "scope_counters",
            counter: { scope: counter.scope, scope_key: counter.scope_key, day: counter.day },
            expected: counter.day === null
              ? { held_usd: counter.expected_usd, open_sessions: counter.expected_open }
              : { spent_usd: counter.expected_usd },
            found: counter.day === null
              ? { held_usd: counter.found_usd, open_sessions: counter.found_open }
              : { spent_usd: counter.found_usd }
          })
        }
        // The grants (D21): each row against its entries, its held amount against its sessions'
        // earmarks, and what the live ones have free against what the wallet has available.
        for (const grant of (yield* repo.grantDrift({ wallet: wallet.id }, LISTED_PER_WALLET)).listed) {
          const { account_id: _account, wallet_id: _wallet, ...mismatch } = grantMismatch(grant)
          report(mismatch)
        }
        for (const grant of yield* repo.earmarkDisagreements(wallet.id, LISTED_PER_WALLET)) {
          report({
            check: "grant_earmarks",
            grant_id: grant.grant_id,
            expected: grant.row_held_usd === null ? null : { held_usd: grant.row_held_usd },
            found: { earmarked_usd: grant.earmarked_usd }
          })
        }
        // The base's part of each balance is what the grants leave of it, never below zero: the
        // base's budget (a budget write's floor counts the grants, D21), its holds and its spending.
        // Its available may be below zero (an over-spend, an unenforced wallet), so the grants' free
        // amounts can be above the wallet's available (a credit after an over-spend) and are not
        // held to it.
        const totals = yield* repo.grantTotals(wallet.id)
        const granted = {
          budget: Money.decimal(totals.budget_usd),
          reserved: Money.decimal(totals.held_usd),
          spent: Money.decimal(totals.drawn_usd)
        }
        if (
          granted.budget.gt(row.balances.budget) || granted.reserved.gt(row.balances.reserved) ||
          granted.spent.gt(row.balances.spent)
        ) {
          report({
            check: "grant_totals",
            expected: formatted(row.balances),
            found: formatted(granted)
          })
        }
        return { entries: replayed.count, mismatches: found }
      })

    /** Every wallet, or the account's; wallets one after another, each in constant memory. */
    const verify = Effect.fn("Books.verify")(function*(accountId: Option.Option<string>) {
      const unknown = new BooksError({ message: `no wallet for account ${Option.getOrElse(accountId, () => "")}` })
      if (Option.exists(accountId, (id) => !isUuid(id))) return yield* unknown
      const verdict = yield* Stream.runFold(
        Stream.mapEffect(repo.wallets(accountId), verifyWallet),
        { wallets: 0, entries: 0, mismatches: [] } as Verdict,
        (verdict, wallet): Verdict => ({
          wallets: verdict.wallets + 1,
          entries: verdict.entries + wallet.entries,
          mismatches: wallet.mismatches.length === 0
            ? verdict.mismatches
            : [...verdict.mismatches, ...wallet.mismatches]
        })
      )
      if (Option.isSome(accountId) && verdict.wallets === 0) return yield* unknown
      return verdict
    })

    /**
     * Every wallet (or the account's) at one look, cheap enough to run hourly on any ledger (D19):
     * each wallet row against its newest entry (balances and sequence), and each running total's
     * group (wallet, UTC day, repository, user) against its spend entries (spent and unfunded).
     * And each grant (D21) against its entries (its amount, drawn, held, ended and state). The count
     * is the wallets, the groups and the grants that disagree. `verify` checks all this and more
     * (every entry, the sessions, the totals' session counts, the grants' earmarks), wallet by wallet.
     */
    const drift = Effect.fn("Books.drift")(function*(accountId: Option.Option<string>) {
      if (Option.exists(accountId, (id) => !isUuid(id))) {
        return yield* new BooksError({ message: `no wallet for account ${Option.getOrElse(accountId, () => "")}` })
      }
      const wallets = yield* repo.walletDrift(accountId, LISTED_DRIFT)
      const totals = yield* repo.spendTotalDrift(accountId, LISTED_DRIFT)
      const grants = yield* repo.grantDrift({ account: accountId }, LISTED_DRIFT)
      const side = (spent: string | null, unfunded: string | null) =>
        spent === null ? null : { spent_usd: spent, unfunded_usd: unfunded }
      const mismatches: Array<Mismatch> = [
        ...wallets.listed.map((wallet): Mismatch => ({
          wallet_id: wallet.wallet_id,
          account_id: wallet.account_id,
          check: "wallet_row",
          expected: {
            budget_usd: wallet.ledger_budget_usd,
            reserved_usd: wallet.ledger_reserved_usd,
            spent_usd: wallet.ledger_spent_usd,
            last_sequence: Number(wallet.ledger_sequence)
          },
          found: {
            budget_usd: wallet.budget_usd,
            reserved_usd: wallet.reserved_usd,
            spent_usd: wallet.spent_usd,
            last_sequence: Number(wallet.last_sequence)
          }
        })),
        ...totals.listed.map((total): Mismatch => ({
          wallet_id: total.wallet_id,
          account_id: total.account_id,
          check: "spend_totals",
          group: { day: total.day, repository_id: total.repository_id, user_id: total.user_id },
          expected: side(total.ledger_spent_usd, total.ledger_unfunded_usd),
          found: side(total.row_spent_usd, total.row_unfunded_usd)
        })),
        ...grants.listed.map(grantMismatch)
      ]
      return { count: wallets.count + totals.count + grants.count, mismatches } satisfies Drift
    })

    return { verify, drift } as const
  }),
  dependencies: [BooksRepo.Default]
}) {}
