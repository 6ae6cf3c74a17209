import { Schema } from "effect"
import type { Earmark } from "./Grants.js"
import type * as Money from "./Money.js"
import type { LimitPeriod, LimitScope, UsedConcurrencyLimit } from "./SpendLimit.js"

/**
 * A runner's settlement session (D8, D12) and the facts the settlement planner
 * reads and writes: the planner's own input and output types, so the rules
 * know nothing of how a repository stores them. (A person's sign-in is another
 * thing; this module is about the money a runner's session holds and spends.)
 */

/** A session's row state: `open`, or closed by a release or by its hold's expiry. */
export const SessionRowState = Schema.Literal("open", "released", "expired")
export type SessionRowState = typeof SessionRowState.Type

/** A session as the planner sees it: what it holds, spent and was charged beyond its holds. */
export interface SessionState {
  readonly session_id: string
  readonly task_id: string | null
  readonly held: Money.Decimal
  readonly spent: Money.Decimal
  /** Charged beyond its holds (D12). */
  readonly unfunded: Money.Decimal
  readonly state: SessionRowState
  readonly expires_at: Date
  /** Attribution (D16), set by the session's first reserve; null when unattributed. */
  readonly repository_id: string | null
  readonly user_id: string | null
  /** The session's own cap (D16, `max_usd`), set by the first reserve; null when it named none. */
  readonly max_usd: Money.Decimal | null
  /** Its labels (D19), set by its first reserve; `{}` when none. */
  readonly labels: Readonly<Record<string, string>>
  /** The highest `warn_at_percent` of the account's session limit announced for it (D19); 0 when none. */
  readonly warned_percent: number
  /** What of its hold is on which grant, in the order its spends draw them (D21); the rest is on the base. */
  readonly earmarks: ReadonlyArray<Earmark>
}

/** A job kind of the settlement queue (D8, D12). */
export type SettlementJobKind = "reserve" | "spend" | "release" | "extend"

/** A key's first outcome, as recorded: the status a duplicate answers as `first_status`. */
export const Outcome = Schema.Literal(
  "applied",
  "insufficient_funds",
  "nothing_to_release",
  "session_closed",
  "limit_reached"
)
export type Outcome = typeof Outcome.Type

/** What a key was first used for (D8): a key answers `duplicate` only to a repeat of its first job. */
export interface JobFingerprint {
  readonly kind: SettlementJobKind
  readonly session_id: string
  /** None for a release, and for records kept before amounts were: then kind and session decide. */
  readonly amount_usd: Money.Decimal | null
  /** An extend's hold time in seconds, the default filled in; none for other kinds and for older records. */
  readonly ttl_seconds: number | null
}

/**
 * The limit a reserve would have passed (D16), as its `limit_reached` result names it: a saved
 * limit, or the session's own cap (`max_usd`), which has no id. A spend limit's amount is the
 * one it enforced (a raise's while it lasts, D19); a concurrency limit (D19) has no amounts and
 * names its maximum and the sessions it found open.
 */
export type LimitHit = SpendLimitHit | ConcurrencyLimitHit

export interface SpendLimitHit {
  readonly kind: "spend"
  readonly id: string | null
  readonly scope: LimitScope
  readonly scope_id: string | null
  /** The member an `each_` limit refused for (D22); null otherwise. */
  readonly applies_to: string | null
  readonly period: LimitPeriod
  readonly window_minutes: number | null
  readonly amount_usd: Money.Decimal
  readonly used_usd: Money.Decimal
  /**
   * A rolling limit's refusal (D22): the seconds until enough spend leaves its window for the
   * reserve to fit; null when it never would, and for the other periods.
   */
  readonly retry_after_seconds: number | null
}

/** A concurrency limit as it stood when it refused: its maximum and the sessions it found open. */
export type ConcurrencyLimitHit = UsedConcurrencyLimit

/** A key's first outcome as stored: the planner's input for keys seen in an earlier batch. */
export interface StoredOutcome {
  readonly job: JobFingerprint
  readonly outcome: Outcome
  readonly entry_ids: ReadonlyArray<string>
  readonly unfunded_usd: Money.Decimal | null
  readonly expires_at: Date | null
  /** A `limit_reached` reserve's limit (D16), answered again to its duplicates. */
  readonly limit: LimitHit | null
  /** A spend that found its session's spent at or past its cap (D16), answered again to its duplicates. */
  readonly cap_reached: boolean
  /** What a refused reserve could have taken (D19), answered again to its duplicates; null otherwise. */
  readonly max_reservable_usd: Money.Decimal | null
}

/** A key's first outcome to store: the planner's output for keys it decided. */
export interface OutcomeToStore extends StoredOutcome {
  readonly idempotency_key: string
}

/**
 * Why a job fails for good, applying nothing: closed codes, in order of
 * precedence (as TigerBeetle's `create_transfers` results are). A job is
 * checked in this order and fails with the first code that applies; its
 * failure (BullMQ's `failedReason`) begins with the code, then `: ` and the
 * detail in prose. The README's job contract lists them.
 */
export const REFUSAL_CODES = [
  /** The job's name is none of the queue's kinds. */
  "unknown_job_kind",
  /** The payload does not decode (a field missing, malformed or out of bounds). */
  "invalid_payload",
  /** No account has the job's `account_id`. */
  "account_not_found",
  /** A reserve's `repository_id` is no repository of the job's account (D16). */
  "repository_not_found",
  /** A reserve's `user_id` is no user whose account the job's is (D16). */
  "user_not_found",
  /** The key was first used for another job (another kind, session, amount or hold time). */
  "idempotency_key_reused",
  /** A reserve names another repository, user or cap than its session's first reserve set (D16). */
  "session_attribution_mismatch",
  /** Booking the job would take a balance past what the books hold (999,999,999,999.999999). */
  "amount_overflow"
] as const
export type RefusalCode = typeof REFUSAL_CODES[number]

/** A refusal as a job's failure carries it: the code first, so a runner can match on it. */
export const refusalMessage = (code: RefusalCode, detail: string) => `${code}: ${detail}`

/** The code a failure message begins with, if it is a refusal's. */
export const refusalCodeOf = (message: string): RefusalCode | undefined =>
  REFUSAL_CODES.find((code) => message.startsWith(`${code}: `))
