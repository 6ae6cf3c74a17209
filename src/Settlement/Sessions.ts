import { DateTime, Effect, Option } from "effect"
import type { Account } from "../Domain/Account.js"
import { textProblem } from "../Domain/Text.js"
import {
  ListedSession,
  SESSION_ENTRIES_LISTED,
  SessionNotFound,
  WalletSession,
  WalletSessionDetail,
  WalletSessionPage
} from "../Domain/Wallet.js"
import { Wallets } from "../Wallets.js"
import { type SessionRow, SettlementSessionsRepo } from "./SessionsRepo.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

/** An id PostgreSQL cannot store (NUL, lone surrogates) names no session. */
const isStorableText = (text: string) => textProblem(text) === undefined

/** Which sessions a page lists (D12): the view's two states over the rows' three. */
export const STATES_LISTED = {
  open: ["open"],
  closed: ["released", "expired"],
  all: ["open", "released", "expired"]
} as const

/** A session row as D12 shows it: the view, and the events that show a session (D17). */
export const sessionOf = (row: SessionRow): WalletSession => {
  const open = row.state === "open"
  return new WalletSession({
    session_id: row.session_id,
    task_id: row.task_id,
    state: open ? "open" : "closed",
    reserved_usd: row.held_usd,
    spent_usd: row.spent_usd,
    unfunded_usd: row.unfunded_usd,
    opened_at: DateTime.unsafeFromDate(row.created_at),
    last_activity_at: DateTime.unsafeFromDate(row.updated_at),
    expires_at: open ? DateTime.unsafeFromDate(row.expires_at) : null,
    closed_reason: row.state === "open" ? null : row.state,
    repository_id: row.repository_id,
    user_id: row.user_id,
    labels: row.labels
  }, trusted)
}

/**
 * A session as the view lists it: with whether it was ever funded (D12's amendment: a session
 * whose every reserve was refused is known, but not open, and shown as refused), which the
 * wallet's ledger tells.
 */
const listedOf = (funded: ReadonlySet<string>) => (row: SessionRow): ListedSession =>
  new ListedSession({ ...sessionOf(row), funded: funded.has(row.session_id) }, trusted)

/**
 * The sessions view (D12): what each of an account's settlement sessions holds, spent and was
 * charged beyond its holds. The settlement feature writes the sessions; their ledger entries are
 * the wallet's, read through its service.
 */
export class SettlementSessions extends Effect.Service<SettlementSessions>()("Settlement/Sessions", {
  effect: Effect.gen(function*() {
    const repo = yield* SettlementSessionsRepo
    const wallets = yield* Wallets

    /** A page of the account's sessions, newest first (D12); `before` must be one of its sessions. */
    const list = Effect.fn("SettlementSessions.list")(function*(
      account: Account,
      page: {
        readonly state: keyof typeof STATES_LISTED
        readonly before: Option.Option<string>
        readonly limit: number
      }
    ) {
      const walletId = yield* wallets.findId(account)
      const unknown = () => new SessionNotFound({ detail: "No session of this account has the id given as before." })
      if (Option.isNone(walletId)) {
        return yield* Option.isSome(page.before)
          ? Effect.fail(unknown())
          : Effect.succeed(new WalletSessionPage({ sessions: [], next_before: null }))
      }
      if (Option.isSome(page.before)) {
        if (!isStorableText(page.before.value)) return yield* unknown()
        const found = yield* repo.findSession({ wallet_id: walletId.value, session_id: page.before.value })
        if (Option.isNone(found)) return yield* unknown()
      }
      const rows = yield* repo.pageSessions({
        wallet_id: walletId.value,
        states: STATES_LISTED[page.state],
        // Open is open and holding or having spent something, as a concurrency limit counts (D19).
        fundedOnly: page.state === "open",
        before: Option.getOrNull(page.before),
        limit: page.limit + 1
      })
      const shown = rows.slice(0, page.limit)
      const funded = yield* wallets.fundedSessions(walletId.value, shown.map((row) => row.session_id))
      const listed = shown.map(listedOf(funded))
      const last = listed[listed.length - 1]
      return new WalletSessionPage(
        { sessions: listed, next_before: rows.length > page.limit && last !== undefined ? last.session_id : null },
        trusted
      )
    })

    /** One session with its entries, oldest first, at most 1,000 (D12). */
    const get = Effect.fn("SettlementSessions.get")(function*(account: Account, sessionId: string) {
      const unknown = () => new SessionNotFound({ detail: "This account has no session with that id." })
      if (!isStorableText(sessionId)) return yield* unknown()
      const walletId = yield* wallets.findId(account)
      if (Option.isNone(walletId)) return yield* unknown()
      const row = yield* repo.findSession({ wallet_id: walletId.value, session_id: sessionId })
      if (Option.isNone(row)) return yield* unknown()
      const entries = yield* wallets.sessionEntries(walletId.value, sessionId, SESSION_ENTRIES_LISTED + 1)
      return new WalletSessionDetail({
        ...listedOf(yield* wallets.fundedSessions(walletId.value, [sessionId]))(row.value),
        entries: entries.slice(0, SESSION_ENTRIES_LISTED),
        entries_truncated: entries.length > SESSION_ENTRIES_LISTED
      }, trusted)
    })

    return { list, get } as const
  }),
  dependencies: [SettlementSessionsRepo.Default, Wallets.Default]
}) {}
