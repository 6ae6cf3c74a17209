import { Option, Schema, type Tracer } from "effect"
import { createHash } from "node:crypto"
import { Labels, Model } from "../Domain/Labels.js"
import * as Money from "../Domain/Money.js"
import { Outcome } from "../Domain/SettlementSession.js"
import { LimitPeriod, LimitScope } from "../Domain/SpendLimit.js"
import { Strict } from "../Domain/Strict.js"
import { textProblem } from "../Domain/Text.js"
import { Wallet } from "../Domain/Wallet.js"

/**
 * The settlement queue's contract (D8), shared by the typed producer, the
 * worker and any runner that enqueues with plain BullMQ: the queue name, the
 * job names, their payloads and the result every job returns.
 */
export const SETTLEMENT_QUEUE = "settlement"

/**
 * How long finished jobs stay in Redis: results readable for a day, failures for a month, for
 * operators. The typed producer sets it on each job; the worker applies it to jobs that say
 * nothing (a plain BullMQ producer's), since Redis must not evict (D14) and would otherwise
 * keep every job for ever.
 */
export const SETTLEMENT_JOB_RETENTION = {
  removeOnComplete: { age: 86_400 },
  removeOnFail: { age: 30 * 86_400 }
} as const

/** What a producer should set on every job (D8); plain BullMQ producers set the same. */
export const SETTLEMENT_JOB_OPTIONS = {
  attempts: 10,
  backoff: { type: "exponential", delay: 500 }
} as const

const Uuid = Schema.UUID.annotations({ message: () => "must be a UUID" })
const Text = (name: string) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => `${name} must not be empty` }),
    Schema.maxLength(255, { message: () => `${name} must be at most 255 characters` }),
    // A string PostgreSQL cannot store would fail the whole batch's transaction (D8: one job never harms another).
    Schema.filter((s) => {
      const problem = textProblem(s)
      return problem === undefined ? true : `${name} ${problem}`
    })
  )
/** A positive amount in the wire format of D6; kept a string in the payload, parsed where it is used. */
const PositiveAmount = (name: string) =>
  Schema.String.pipe(
    Schema.filter((s) => {
      const problem = Money.wireProblem(s)
      if (problem !== undefined) return `${name} ${problem}`
      return Money.decimal(s).isZero() ? `${name} must be above zero` : true
    })
  )
const Amount = PositiveAmount("amount_usd")

/**
 * The producer's trace context, a W3C `traceparent` (D18): the worker links its settlement
 * batch's span to it. Optional, never compared, and one that is not well formed is ignored:
 * tracing never fails a job.
 */
const Traceparent = Schema.optional(Schema.String)

export const ReservePayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  task_id: Schema.optional(Text("task_id")),
  amount_usd: Amount,
  idempotency_key: Text("idempotency_key"),
  /** The session's repository, one of the job's account (D16); set by the session's first reserve. */
  repository_id: Schema.optional(Uuid),
  /** The session's user, one whose account the job's is (D16); set by the session's first reserve. */
  user_id: Schema.optional(Uuid),
  /** The session's cap (D16): the most it may hold plus spend; set by the first reserve that names one. */
  max_usd: Schema.optional(PositiveAmount("max_usd")),
  /** The session's labels (D19): set by its first reserve, inherited by the later ones. */
  labels: Schema.optional(Labels),
  traceparent: Traceparent
}).annotations({ identifier: "ReservePayload", ...Strict })
export type ReservePayload = typeof ReservePayload.Type

export const SpendPayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  amount_usd: Amount,
  idempotency_key: Text("idempotency_key"),
  /** The model the spend paid for (D19), on its ledger entry and in the spend report. */
  model: Schema.optional(Model),
  traceparent: Traceparent
}).annotations({ identifier: "SpendPayload", ...Strict })
export type SpendPayload = typeof SpendPayload.Type

export const ReleasePayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  idempotency_key: Text("idempotency_key"),
  traceparent: Traceparent
}).annotations({ identifier: "ReleasePayload", ...Strict })
export type ReleasePayload = typeof ReleasePayload.Type

/** The longest and shortest heartbeat a hold takes (D12): a minute to a week. */
export const EXTEND_TTL_SECONDS = { min: 60, max: 604_800 } as const

/** Keeps an open hold alive (D12): its expiry becomes now + `ttl_seconds` (`RESERVATION_TTL_SECONDS` when omitted). */
export const ExtendPayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  idempotency_key: Text("idempotency_key"),
  ttl_seconds: Schema.optional(
    Schema.Int.pipe(Schema.between(EXTEND_TTL_SECONDS.min, EXTEND_TTL_SECONDS.max)).annotations({
      message: () => ({
        message: `ttl_seconds must be an integer from ${EXTEND_TTL_SECONDS.min} to ${EXTEND_TTL_SECONDS.max}`,
        override: true
      })
    })
  ),
  traceparent: Traceparent
}).annotations({ identifier: "ExtendPayload", ...Strict })
export type ExtendPayload = typeof ExtendPayload.Type

/** Job name → payload schema. */
export const SettlementPayloads = {
  reserve: ReservePayload,
  spend: SpendPayload,
  release: ReleasePayload,
  extend: ExtendPayload
} as const
export type SettlementKind = keyof typeof SettlementPayloads
export const SETTLEMENT_KINDS = Object.keys(SettlementPayloads) as ReadonlyArray<SettlementKind>
export const isSettlementKind = (name: string): name is SettlementKind =>
  (SETTLEMENT_KINDS as ReadonlyArray<string>).includes(name)

export type SettlementJob =
  | { readonly kind: "reserve"; readonly payload: ReservePayload }
  | { readonly kind: "spend"; readonly payload: SpendPayload }
  | { readonly kind: "release"; readonly payload: ReleasePayload }
  | { readonly kind: "extend"; readonly payload: ExtendPayload }

export { Outcome } from "../Domain/SettlementSession.js"

/**
 * The limit a `limit_reached` reserve would have passed (D16): a saved limit, or the session's
 * own cap (`max_usd`), which has no id (`id` null, scope and period `session`). A spend limit
 * names its amount (the effective one, a raise's while it lasts, D19) and use; a concurrency
 * limit (D19, period `concurrent`) has null amounts and names its `max_open_sessions` and the
 * `open_sessions` it found.
 */
export const ReachedLimit = Schema.Struct({
  id: Schema.NullOr(Schema.String),
  scope: LimitScope,
  scope_id: Schema.NullOr(Schema.String),
  /** The member an `each_` limit refused for (D22): a user's or repository's id, a label's `key=value`. */
  applies_to: Schema.optional(Schema.String),
  period: LimitPeriod,
  /** A rolling limit's window (D22), with when a reserve of the refused size fits again (null: never). */
  window_minutes: Schema.optional(Schema.Int),
  retry_after_seconds: Schema.optional(Schema.NullOr(Schema.Int)),
  amount_usd: Schema.NullOr(Schema.String),
  used_usd: Schema.NullOr(Schema.String),
  max_open_sessions: Schema.optional(Schema.Int),
  open_sessions: Schema.optional(Schema.Int)
}).annotations({ identifier: "ReachedLimit" })
export type ReachedLimit = typeof ReachedLimit.Type

/** Every job's return value (D8). */
export const SettlementResult = Schema.Struct({
  status: Schema.Literal(
    "applied",
    "duplicate",
    "insufficient_funds",
    "nothing_to_release",
    "session_closed",
    "limit_reached"
  ),
  first_status: Schema.optional(Outcome),
  entry_ids: Schema.Array(Schema.String),
  /** The wallet right after the job (after its batch, for a refusal or a duplicate). */
  wallet: Schema.encodedSchema(Wallet),
  unfunded_usd: Schema.optional(Schema.String),
  /** An applied extend's new expiry of the hold (D12), ISO 8601; a duplicate answers the first one's. */
  expires_at: Schema.optional(Schema.String),
  /** A `limit_reached` reserve's limit (D16); a duplicate answers the first one's. */
  limit: Schema.optional(ReachedLimit),
  /**
   * On `limit_reached` and `insufficient_funds` (D19): the largest reserve the job could have
   * taken at that moment, "0.000000" when none; a duplicate answers the first one's.
   */
  max_reservable_usd: Schema.optional(Schema.String),
  /**
   * On `limit_reached` by a rolling limit (D22): the seconds until enough spend leaves its window
   * for a reserve of this size to fit; null when it never would. A duplicate answers the first one's.
   */
  retry_after_seconds: Schema.optional(Schema.NullOr(Schema.Int)),
  /** On a spend whose session's spent has reached its cap (D16), and on every later spend of it: the runner stops. */
  cap_reached: Schema.optional(Schema.Literal(true))
}).annotations({ identifier: "SettlementResult" })
export type SettlementResult = typeof SettlementResult.Type

/**
 * BullMQ's job id for a key: deterministic, so a second enqueue of the same key
 * while the first is still known to BullMQ is a no-op; free of `:`, which
 * BullMQ ids may not contain. The database, not this id, guarantees once (D8).
 */
export const jobIdOf = (accountId: string, idempotencyKey: string) =>
  `settle-${createHash("sha256").update(`${accountId}\n${idempotencyKey}`).digest("base64url")}`

/** A W3C trace context, as a job's optional `traceparent` carries its producer's span (D18). */
export const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The span a producer enqueues under, as the job's `traceparent` (W3C); nothing outside a traced span. */
export const traceparentOf = (span: Option.Option<Tracer.Span>): { readonly traceparent?: string } => {
  if (Option.isNone(span)) return {}
  const { sampled, spanId, traceId } = span.value
  const traceparent = `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`
  return TRACEPARENT.test(traceparent) ? { traceparent } : {}
}
