import { Schema } from "effect"
import { createHash } from "node:crypto"

/**
 * The settlement queue's contract (D8), shared by the typed producer, the
 * worker and any runner that enqueues with plain BullMQ: the queue name, the
 * job names, their payloads and the result every job returns.
 */
export const SETTLEMENT_QUEUE = "settlement"

/** What a producer should set on every job (D8); plain BullMQ producers set the same. */
export const SETTLEMENT_JOB_OPTIONS = {
  attempts: 10,
  backoff: { type: "exponential", delay: 500 }
} as const

const Uuid = Schema.UUID.annotations({ message: () => "must be a UUID" })
const Text = (name: string) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => `${name} must not be empty` }),
    Schema.maxLength(255, { message: () => `${name} must be at most 255 characters` })
  )
const Amount = Schema.String.pipe(
  Schema.pattern(/^\d{1,12}(\.\d{1,6})?$/, {
    message: () => "amount_usd must be a decimal string with at most 12 digits and 6 decimals"
  })
)

const strict = { parseOptions: { onExcessProperty: "error", errors: "all" } } as const

export const ReservePayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  task_id: Schema.optional(Text("task_id")),
  amount_usd: Amount,
  idempotency_key: Text("idempotency_key")
}).annotations({ identifier: "ReservePayload", ...strict })
export type ReservePayload = typeof ReservePayload.Type

export const SpendPayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  amount_usd: Amount,
  idempotency_key: Text("idempotency_key")
}).annotations({ identifier: "SpendPayload", ...strict })
export type SpendPayload = typeof SpendPayload.Type

export const ReleasePayload = Schema.Struct({
  account_id: Uuid,
  session_id: Text("session_id"),
  idempotency_key: Text("idempotency_key")
}).annotations({ identifier: "ReleasePayload", ...strict })
export type ReleasePayload = typeof ReleasePayload.Type

/** Job name → payload schema. */
export const SettlementPayloads = {
  reserve: ReservePayload,
  spend: SpendPayload,
  release: ReleasePayload
} as const
export type SettlementKind = keyof typeof SettlementPayloads
export const SETTLEMENT_KINDS = Object.keys(SettlementPayloads) as ReadonlyArray<SettlementKind>

export type SettlementJob =
  | { readonly kind: "reserve"; readonly payload: ReservePayload }
  | { readonly kind: "spend"; readonly payload: SpendPayload }
  | { readonly kind: "release"; readonly payload: ReleasePayload }

export const Outcome = Schema.Literal("applied", "insufficient_funds", "nothing_to_release")
export type Outcome = typeof Outcome.Type

/** The wallet as it stood right after the job (or, for a duplicate, as it stands now). */
export const WalletSnapshot = Schema.Struct({
  id: Schema.String,
  owner_kind: Schema.Literal("client", "user"),
  owner_id: Schema.String,
  currency: Schema.Literal("USD"),
  budget_usd: Schema.String,
  reserved_usd: Schema.String,
  spent_usd: Schema.String,
  available_usd: Schema.String,
  enforced: Schema.Boolean,
  version: Schema.Int,
  created_at: Schema.String,
  updated_at: Schema.String
})

/** Every job's return value (D8). */
export const SettlementResult = Schema.Struct({
  status: Schema.Literal("applied", "duplicate", "insufficient_funds", "nothing_to_release"),
  first_status: Schema.optional(Outcome),
  entry_ids: Schema.Array(Schema.String),
  wallet: WalletSnapshot,
  unfunded_usd: Schema.optional(Schema.String)
}).annotations({ identifier: "SettlementResult" })
export type SettlementResult = typeof SettlementResult.Type

/**
 * BullMQ's job id for a key: deterministic, so a second enqueue of the same key
 * while the first is still known to BullMQ is a no-op; free of `:`, which
 * BullMQ ids may not contain. The database, not this id, guarantees once (D8).
 */
export const jobIdOf = (accountId: string, idempotencyKey: string) =>
  `settle-${createHash("sha256").update(`${accountId}\n${idempotencyKey}`).digest("base64url")}`
