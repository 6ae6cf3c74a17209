import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { DateTime, Predicate, Schema } from "effect"
import { AccountKind } from "./Account.js"
import { Grant, GrantShare, NextExpiry } from "./Grants.js"
import { Labels } from "./Labels.js"
import * as Money from "./Money.js"
import type { WithResponseHeaders } from "./Problem.js"
import { parseInstant } from "./Time.js"

/** The account-wide USD wallet as clients see it (seed §2.5). Amounts are exact decimals. */
export class Wallet extends Schema.Class<Wallet>("Wallet")({
  id: Schema.String,
  owner_kind: AccountKind,
  owner_id: Schema.String,
  currency: Schema.Literal("USD"),
  budget_usd: Money.Usd,
  reserved_usd: Money.Usd,
  spent_usd: Money.Usd,
  /** budget - reserved - spent; negative after an over-spend (D8). */
  available_usd: Money.Usd,
  enforced: Schema.Boolean,
  /** Counts budget decisions (budget set, credit added), not reservations or settlement (D6). */
  version: Schema.Int,
  created_at: Schema.DateTimeUtc,
  updated_at: Schema.DateTimeUtc
}) {}

/** The wallet read (`GET /developer/account/wallet`): the wallet, and the soonest live grant to expire (D21). */
export class WalletRead extends Wallet.extend<WalletRead>("WalletRead")({
  next_expiry: Schema.NullOr(NextExpiry)
}) {}

/** The wallet after a credit, with the grant it made (D21). */
export class CreditAdded extends Wallet.extend<CreditAdded>("CreditAdded")({ grant: Grant }) {}

/**
 * A wallet as `Schema.encode(Wallet)` writes it, field by field. The worker answers one with
 * every job and the wallet read with every request; a schema encode costs more than the rest
 * of either. `test/WalletsLedger.test.ts` holds the two equal.
 */
export const encodedWallet = (wallet: Wallet): typeof Wallet.Encoded => ({
  id: wallet.id,
  owner_kind: wallet.owner_kind,
  owner_id: wallet.owner_id,
  currency: wallet.currency,
  budget_usd: Money.format(wallet.budget_usd),
  reserved_usd: Money.format(wallet.reserved_usd),
  spent_usd: Money.format(wallet.spent_usd),
  available_usd: Money.format(wallet.available_usd),
  enforced: wallet.enforced,
  version: wallet.version,
  created_at: DateTime.formatIso(wallet.created_at),
  updated_at: DateTime.formatIso(wallet.updated_at)
})

export const LedgerEntryKind = Schema.Literal(
  "budget_set",
  "credit_added",
  "reserve",
  "reserve_release",
  "spend",
  "credit_expired",
  "credit_voided"
)
export type LedgerEntryKind = typeof LedgerEntryKind.Type

/** One movement of a wallet with the balances after it (seed §2.6, D7). */
export class LedgerEntry extends Schema.Class<LedgerEntry>("LedgerEntry")({
  id: Schema.String,
  /** 1, 2, 3, ... per wallet with no gaps, so a client can see that nothing is missing (D7). */
  sequence: Schema.Int,
  kind: LedgerEntryKind,
  /** Positive, except for budget_set: the signed change of the budget. */
  amount_usd: Money.Usd,
  budget_after_usd: Money.Usd,
  reserved_after_usd: Money.Usd,
  spent_after_usd: Money.Usd,
  available_after_usd: Money.Usd,
  /** Always null: credit is an administrative action and no payment integration exists. */
  payment_provider: Schema.Null,
  session_id: Schema.NullOr(Schema.String),
  task_id: Schema.NullOr(Schema.String),
  note: Schema.NullOr(Schema.String),
  /** The session's repository and user (D16); null when unattributed and on budget entries. */
  repository_id: Schema.NullOr(Schema.String),
  user_id: Schema.NullOr(Schema.String),
  /** The model a spend paid for (D19); null on every other entry and on spends that named none. */
  model: Schema.NullOr(Schema.String),
  /** The session's labels (D19), on each of its entries; `{}` when none and on budget entries. */
  labels: Labels,
  /**
   * The grants it moved (D21): the grant a credit added or an expiry or void ended, what a
   * reserve earmarked, a release returned or a spend drew; empty when only the base moved.
   */
  grants: Schema.Array(GrantShare),
  created_at: Schema.DateTimeUtc
}) {}

/**
 * The wallet's balances as of a past time (D19): the balances after the last ledger entry at or
 * before it, and which entry that was (none, and zeros, before the wallet's first).
 */
export class WalletAsOf extends Schema.Class<WalletAsOf>("WalletAsOf")({
  /** The time asked for, in UTC to the millisecond. */
  as_of: Schema.DateTimeUtc,
  budget_usd: Money.Usd,
  reserved_usd: Money.Usd,
  spent_usd: Money.Usd,
  /** budget - reserved - spent; negative after an over-spend (D8). */
  available_usd: Money.Usd,
  /** The entry whose balances these are; null before the wallet's first entry. */
  entry_id: Schema.NullOr(Schema.String),
  /** That entry's sequence; 0 before the wallet's first entry. */
  sequence: Schema.Int
}) {}

const codePoints = (s: string) => [...s].length

/** 1 to 255 characters, scoped to the account (D6). */
export const IdempotencyKey = Schema.String.pipe(
  Schema.filter((key) =>
    codePoints(key) < 1
      ? "must not be empty"
      : codePoints(key) > 255
      ? "must be at most 255 characters"
      : key.includes("\u0000")
      ? "must not contain NUL characters"
      : true, { jsonSchema: { minLength: 1, maxLength: 255 } })
).annotations({
  identifier: "IdempotencyKey",
  description: "Unique per logical action; send the same key again when retrying that action."
})

/** Recorded on the ledger entry. */
export const Note = Schema.String.pipe(
  Schema.filter((note) =>
    codePoints(note) > 1000
      ? "must be at most 1000 characters"
      : note.includes("\u0000")
      ? "must not contain NUL characters"
      : true, { jsonSchema: { maxLength: 1000 } })
).annotations({ identifier: "Note" })

/**
 * What makes two wallet mutations "the same request" (D6): the amount as a
 * number ("5" and "5.000000" are the same) and the note; the endpoint is
 * compared beside it, `expected_version` never. Computed from the raw body
 * before it is validated, because the idempotency lookup comes first: an amount
 * that is not a valid wire amount keeps its raw form, so it never matches the
 * fingerprint of a recorded (and so valid) request.
 */
export const requestFingerprint = (
  body: unknown,
  amountField: string,
  /** D21's credit terms, compared only when sent: a request without them fingerprints as before. */
  terms: ReadonlyArray<string> = []
): string => {
  const field = (name: string): unknown => Predicate.isRecord(body) ? body[name] : undefined
  const amount = field(amountField)
  const parsed = typeof amount === "string" ? Money.parseWire(amount) : undefined
  const note = field("note")
  const sent = terms.flatMap((name) => {
    const value = field(name)
    if (value === undefined) return []
    // A time compares as the moment it names: "2027-01-01T00:00:00Z" and "2027-01-01T01:00:00+01:00" are one expiry.
    const moment = typeof value === "string" ? parseInstant(value) : undefined
    return [[name, moment === undefined ? { raw: value } : DateTime.formatIso(moment)] as const]
  })
  return JSON.stringify({
    amount_usd: parsed !== undefined ? Money.format(parsed) : { raw: amount ?? null },
    note: typeof note === "string" || note === undefined ? note ?? null : { raw: note },
    ...Object.fromEntries(sent)
  })
}

export class BudgetBelowCommitted extends Schema.TaggedError<BudgetBelowCommitted>()(
  "BudgetBelowCommitted",
  {
    detail: Schema.String,
    /** spent + reserved + the live grants' free amounts (D21): the lowest budget that can be set now. */
    minimum_budget_usd: Money.Usd
  },
  HttpApiSchema.annotations({ status: 409 })
) {}

export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()(
  "IdempotencyKeyReused",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 422 })
) {}

export class IdempotencyInProgress extends Schema.TaggedError<IdempotencyInProgress>()(
  "IdempotencyInProgress",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) implements WithResponseHeaders {
  get responseHeaders() {
    return { "retry-after": "1" }
  }
}

export class LedgerEntryNotFound extends Schema.TaggedError<LedgerEntryNotFound>()(
  "LedgerEntryNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** A page of the ledger, newest first (D7). */
export class LedgerPage extends Schema.Class<LedgerPage>("LedgerPage")({
  entries: Schema.Array(LedgerEntry),
  /** The id to pass as `before` for the next (older) page; null on the last page. */
  next_before: Schema.NullOr(Schema.String)
}) {}

/** A run's money as clients see it (D12): what it holds now, what it spent, and how it ended. */
export class WalletSession extends Schema.Class<WalletSession>("WalletSession")({
  session_id: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  /** `open` while it holds or may still spend; `closed` after its release or its expiry. */
  state: Schema.Literal("open", "closed"),
  /** Held now. */
  reserved_usd: Money.Usd,
  spent_usd: Money.Usd,
  /** Charged beyond its holds (spends after the hold ran out). */
  unfunded_usd: Money.Usd,
  opened_at: Schema.DateTimeUtc,
  last_activity_at: Schema.DateTimeUtc,
  /** When its hold lapses unless a heartbeat moves it; null once closed. */
  expires_at: Schema.NullOr(Schema.DateTimeUtc),
  closed_reason: Schema.NullOr(Schema.Literal("released", "expired")),
  /** Set by its first reserve (D16); null when unattributed. */
  repository_id: Schema.NullOr(Schema.String),
  user_id: Schema.NullOr(Schema.String),
  /** Set by its first reserve (D19); `{}` when none. */
  labels: Labels
}) {}

/**
 * A session as the sessions view lists it (D12's amendment on refused sessions): the session, and
 * whether any reserve of it was applied or any spend booked. A session whose reserves were all
 * refused is `funded: false`: known, never open for `state=open` (nor counted by a concurrency
 * limit, D19). Events carry the session without it (`WalletSession`), as they always have.
 */
export class ListedSession extends WalletSession.extend<ListedSession>("ListedSession")({
  funded: Schema.Boolean
}) {}

/** A page of sessions, newest first (D12), in the ledger's envelope (D7). */
export class WalletSessionPage extends Schema.Class<WalletSessionPage>("WalletSessionPage")({
  sessions: Schema.Array(ListedSession),
  /** The session id to pass as `before` for the next (older) page; null on the last page. */
  next_before: Schema.NullOr(Schema.String)
}) {}

/** Most entries one session's read lists (D12). */
export const SESSION_ENTRIES_LISTED = 1000

/** A session with its ledger entries, oldest first. */
export class WalletSessionDetail extends ListedSession.extend<WalletSessionDetail>("WalletSessionDetail")({
  entries: Schema.Array(LedgerEntry),
  /** True when the session has more entries than the 1,000 listed. */
  entries_truncated: Schema.Boolean
}) {}

export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()(
  "SessionNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** The export's columns, in order (D13; D16 and D19 append theirs, then D21 `grants`). */
export const LEDGER_CSV_COLUMNS = [
  "id",
  "sequence",
  "created_at",
  "kind",
  "amount_usd",
  "budget_usd_after",
  "reserved_usd_after",
  "spent_usd_after",
  "available_usd_after",
  "session_id",
  "task_id",
  "idempotency_key",
  "note",
  "repository_id",
  "user_id",
  "model",
  "labels",
  "grants"
] as const
