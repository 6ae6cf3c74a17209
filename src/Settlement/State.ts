import { DateTime, Schema } from "effect"
import type { Account } from "../Domain/Account.js"
import { Threshold } from "../Domain/Events.js"
import * as Money from "../Domain/Money.js"
import type { LimitHit, SessionState, StoredOutcome } from "../Domain/SettlementSession.js"
import { applicable, limitKey, type UsedLimit, usedLimitOfColumns } from "../Domain/SpendLimit.js"
import type { GrantRow } from "../Wallets/GrantRows.js"
import type { appendTo } from "../Wallets/Ledger.js"
import type { ReservePayload } from "./Jobs.js"
import { announcementKey } from "./Limits.js"
import type {
  BatchState,
  StateGrant,
  StateLimit,
  StateRecord,
  StateRequest,
  StateSession,
  StateWallet
} from "./Transition.js"

/**
 * The settlement transition's state read (Transition.ts) as the planner's inputs, and the
 * request for it. PostgreSQL wrote that JSON from typed columns in our own statement, so its
 * values are taken as they are: amounts become decimals, times dates, nothing is validated again.
 */

const amount = (value: string | null) => value === null ? null : Money.decimal(value)
const date = (value: string | null) => value === null ? null : new Date(value)

/**
 * The time the transition stamps on what it writes: the read's `now()`. Every bound the batch
 * judges (a limit's period, a raise's `until`, a new hold's expiry) is judged by it too.
 */
export const nowOf = (state: BatchState): Date => new Date(state.time)

/** The time the transition stamps on what it writes, as the ledger's entry builder takes it. */
export const timeOf = (state: BatchState): DateTime.Utc => DateTime.unsafeMake(new Date(state.time))

/** The wallet as the ledger's entry builder takes it. */
export const walletRowOf = (account: Account, wallet: StateWallet): Parameters<typeof appendTo>[0] => ({
  id: wallet.id,
  account_kind: account.kind,
  account_id: account.id,
  budget_usd: Money.decimal(wallet.budget_usd),
  reserved_usd: Money.decimal(wallet.reserved_usd),
  spent_usd: Money.decimal(wallet.spent_usd),
  enforced: wallet.enforced,
  version: wallet.version,
  last_sequence: wallet.last_sequence,
  created_at: DateTime.unsafeMake(new Date(wallet.created_at)),
  updated_at: DateTime.unsafeMake(new Date(wallet.updated_at))
})

export const sessionStateOf = (row: StateSession): SessionState => ({
  session_id: row.session_id,
  task_id: row.task_id,
  held: Money.decimal(row.held_usd),
  spent: Money.decimal(row.spent_usd),
  unfunded: Money.decimal(row.unfunded_usd),
  state: row.state,
  expires_at: new Date(row.expires_at),
  repository_id: row.repository_id,
  user_id: row.user_id,
  max_usd: amount(row.max_usd),
  labels: row.labels ?? {},
  warned_percent: row.warned_percent,
  earmarks: (row.earmarks ?? []).map((earmark) => ({
    grant_id: earmark.grant_id,
    amount: Money.decimal(earmark.amount_usd)
  }))
})

/** A grant's row as the events' views take it, with its money as the batch left it. */
export const grantRowOf = (row: StateGrant, wallet_id: string): GrantRow => ({
  id: row.id,
  wallet_id,
  entry_id: row.entry_id,
  amount_usd: Money.decimal(row.amount_usd),
  drawn_usd: Money.decimal(row.drawn_usd),
  held_usd: Money.decimal(row.held_usd),
  ended_usd: Money.decimal(row.ended_usd),
  priority: row.priority,
  category: row.category,
  expires_at: row.expires_at === null ? null : DateTime.unsafeMake(new Date(row.expires_at)),
  state: row.state,
  note: row.note,
  created_at: DateTime.unsafeMake(new Date(row.created_at)),
  warned_days: row.warned_days
})

/** A recorded limit as its result named it: a concurrency limit's has no amounts (D19). */
const limitHitOf = (hit: NonNullable<StateRecord["limit_hit"]>): LimitHit =>
  hit.amount_usd === null || hit.used_usd === null
    ? {
      kind: "concurrent",
      id: hit.id ?? "",
      scope: hit.scope,
      scope_id: hit.scope_id,
      applies_to: hit.applies_to ?? null,
      period: "concurrent",
      window_minutes: null,
      max_open_sessions: hit.max_open_sessions ?? 0,
      open_sessions: hit.open_sessions ?? 0
    }
    : {
      kind: "spend",
      id: hit.id,
      scope: hit.scope,
      scope_id: hit.scope_id,
      applies_to: hit.applies_to ?? null,
      period: hit.period,
      window_minutes: hit.window_minutes ?? null,
      amount_usd: Money.decimal(hit.amount_usd),
      used_usd: Money.decimal(hit.used_usd),
      retry_after_seconds: hit.retry_after_seconds ?? null
    }

export const storedOutcomeOf = (row: StateRecord): StoredOutcome => ({
  job: {
    kind: row.kind,
    session_id: row.session_id,
    amount_usd: amount(row.amount_usd),
    ttl_seconds: row.ttl_seconds
  },
  outcome: row.outcome,
  entry_ids: row.entry_ids,
  unfunded_usd: amount(row.unfunded_usd),
  expires_at: date(row.expires_at),
  limit: row.limit_hit === null ? null : limitHitOf(row.limit_hit),
  cap_reached: row.cap_reached,
  max_reservable_usd: amount(row.max_reservable_usd)
})

/** A saved limit with its use, its effective amount at `now` (D19) and its period's bounds. */
export const usedLimitOf = (row: StateLimit, now: Date): UsedLimit =>
  usedLimitOfColumns({
    ...row,
    amount_usd: amount(row.amount_usd),
    used_usd: amount(row.used_usd),
    raise_amount_usd: amount(row.raise_amount_usd),
    raise_until: date(row.raise_until),
    period_start: date(row.period_start),
    period_end: date(row.period_end),
    leaving: (row.leaving ?? []).map((spend) => ({
      at: new Date(spend.at),
      amount_usd: Money.decimal(spend.amount_usd)
    }))
  }, now)

/** The limits a batch judges an account's sessions by (D22): each `each_` limit per member, less those a member's own replaces. */
export const limitsOf = (rows: ReadonlyArray<StateLimit>, now: Date): ReadonlyArray<UsedLimit> =>
  applicable(rows.map((row) => usedLimitOf(row, now)))

/** What a limit's current period has announced, as the plan takes it: `limit id[/member]/percent`. */
export const announcedOf = (rows: ReadonlyArray<StateLimit>): Set<string> =>
  new Set(rows.flatMap((row) => row.announced.map((percent) => announcementKey(limitKey(row), percent))))

/** The members a reserve names (D22), by the scope of their counters: whom the `each_` limits are read for. */
export const membersOf = (account_id: string, payload: ReservePayload): StateRequest["members"] => [
  ...(payload.user_id === undefined
    ? []
    : [{ account_id, scope: "user" as const, scope_key: payload.user_id.toLowerCase() }]),
  ...(payload.repository_id === undefined
    ? []
    : [{ account_id, scope: "repository" as const, scope_key: payload.repository_id.toLowerCase() }]),
  ...Object.entries(payload.labels ?? {}).map(([key, value]) => ({
    account_id,
    scope: "label" as const,
    scope_key: `${key}=${value}`
  }))
]

const decodeThresholds = Schema.decodeUnknownSync(Schema.Array(Threshold))

/** The thresholds as saved (their column holds them encoded, as the alerts' PUT wrote them). */
export const thresholdsOf = (saved: unknown): ReadonlyArray<Threshold> => decodeThresholds(saved)
