import { Schema } from "effect"
import { Grant } from "./Grants.js"
import * as Money from "./Money.js"
import { DecidedRaiseRequest, PendingRaiseRequest } from "./RaiseRequests.js"
import { SettingsUpdated } from "./Settings.js"
import { SavedLimit } from "./Spend.js"
import { LimitScope } from "./SpendLimit.js"
import { LedgerEntry, Wallet, WalletSession } from "./Wallet.js"

/**
 * The event catalog (D17): every event type with the schema of its `data`, in one place. It
 * drives the `type` filter of the pull and the stream, the OpenAPI document (the union of the
 * envelopes below) and the README's table (test/Events.test.ts holds the table equal to it).
 */

/** A budget decision or a credit: the entry written and the wallet right after it. */
export const WalletChange = Schema.Struct({ entry: LedgerEntry, wallet: Wallet })

/** D21: a live grant that expires in 7 days, then in 1 day; `free_usd` is what would expire now. */
export const GrantExpiring = Schema.Struct({
  grant: Grant,
  free_usd: Money.Usd,
  days_left: Schema.Literal(7, 1)
})

/** D21: a grant that expired or was voided, with the entry that took its free amount out of the budget. */
export const GrantEnded = Schema.Struct({ grant: Grant, entry: LedgerEntry })

const PercentOfBudget = Schema.Int.pipe(Schema.between(1, 100)).annotations({
  message: () => ({ message: "must be an integer from 1 to 100", override: true })
})

/** An alert threshold as the account saved it, amounts at six decimals as everywhere (D6). */
export const Threshold = Schema.Union(
  Schema.Struct({ amount_usd: Money.Usd }),
  Schema.Struct({ percent_of_budget: PercentOfBudget })
).annotations({ identifier: "AlertThreshold" })
export type Threshold = typeof Threshold.Type

/** An alert threshold as `PUT /developer/account/alerts` takes it: an amount above zero, or a percentage of the budget. */
export const ThresholdInput = Schema.Union(
  Schema.Struct({ amount_usd: Money.PositiveUsdAmount }),
  Schema.Struct({ percent_of_budget: PercentOfBudget })
).annotations({ identifier: "AlertThresholdInput" })

/** A threshold crossed: the threshold as saved, what it came to in dollars then, and the wallet after the change. */
export const BalanceCrossing = Schema.Struct({
  threshold: Threshold,
  threshold_usd: Money.Usd,
  wallet: Wallet
})

/** An enforced wallet whose available amount reached zero or below. */
export const Depletion = Schema.Struct({ wallet: Wallet })

/** A settlement session as D12 shows it, once it closed (released or expired). */
export const SessionClosed = Schema.Struct({ session: WalletSession })

/** A session whose held plus spent reached its cap (D16). */
export const SessionCapReached = Schema.Struct({
  session: WalletSession,
  max_usd: Money.Usd
})

/** A spend limit as D16 shows it: its amount is the one it enforced then (a raise's while it lasts, D19). */
const ReachedSpendLimit = Schema.Struct({
  id: Schema.String,
  scope: LimitScope,
  scope_id: Schema.NullOr(Schema.String),
  /** The member an `each_` limit was reached by (D22): a user's or repository's id, a label's `key=value`. */
  applies_to: Schema.optional(Schema.String),
  period: Schema.Literal("hour", "day", "week", "month", "session"),
  amount_usd: Money.Usd,
  used_usd: Money.Usd
})

/** A spend limit at the moment its use reached its amount. */
export const LimitReached = Schema.Struct({ limit: ReachedSpendLimit })

/** A spend limit whose use first reached one of its `warn_at_percent` in a period (D19); for a session limit, `session_id` names the session. */
export const LimitApproaching = Schema.Struct({
  limit: ReachedSpendLimit,
  percent: Schema.Int,
  used_usd: Money.Usd,
  session_id: Schema.optional(Schema.String)
})

/** A webhook endpoint the service turned off (a 410, or only failures for 5 days). */
export const WebhookEndpointDisabled = Schema.Struct({
  endpoint: Schema.Struct({ id: Schema.String, url: Schema.String }),
  reason: Schema.Literal("gone", "failing")
})

/** The limits replaced by an administrator (D19): who, the new version and the list as saved, without its use. */
export const LimitsUpdated = Schema.Struct({
  user_id: Schema.String,
  version: Schema.Int,
  limits: Schema.Array(SavedLimit)
})

/** A member asked for a temporary raise of a spend limit (D22): the request as it was made. */
export const LimitRaiseRequested = Schema.Struct({ request: PendingRaiseRequest })

/**
 * An administrator decided a raise request (D22): `approved` (the request's approved_amount_usd and
 * approved_until are the raise set, whose `limits.updated` is in the same transaction) or
 * `declined` (with its decline_reason); `request.decided_by` is who.
 */
export const LimitRaiseDecided = Schema.Struct({
  decision: Schema.Literal("approved", "declined"),
  request: DecidedRaiseRequest
})

/**
 * Every type, in the order the README lists them, with its data and one line of what it means.
 * `emitted` says whether the code writes it yet (webhooks come next).
 */
export const catalog = {
  "wallet.budget_set": {
    data: WalletChange,
    emitted: true,
    description: "A budget was set (PUT /developer/account/wallet): the budget_set entry and the wallet after it."
  },
  "wallet.credit_added": {
    data: WalletChange,
    emitted: true,
    description: "Credit was added (POST /developer/account/wallet/credits): the credit_added entry and the wallet."
  },
  "wallet.balance_low": {
    data: BalanceCrossing,
    emitted: true,
    description: "available_usd fell below an alert threshold; once per crossing."
  },
  "wallet.balance_recovered": {
    data: BalanceCrossing,
    emitted: true,
    description: "available_usd rose back to an alert threshold after falling below it; once per crossing."
  },
  "wallet.depleted": {
    data: Depletion,
    emitted: true,
    description: "An enforced wallet's available_usd reached zero or below; once per crossing."
  },
  "session.closed": {
    data: SessionClosed,
    emitted: true,
    description: "A settlement session closed (released or expired), with its closed_reason."
  },
  "session.cap_reached": {
    data: SessionCapReached,
    emitted: true,
    description: "A session's held plus spent reached its cap; once per session."
  },
  "limit.reached": {
    data: LimitReached,
    emitted: true,
    description:
      "A spend limit was reached: a reserve refused by it, or its use taken to its amount; once per limit per period."
  },
  "limit.approaching": {
    data: LimitApproaching,
    emitted: true,
    description: "A spend limit's use first reached one of its warn_at_percent; once per limit, percentage and " +
      "period (for a session limit, once per session and percentage)."
  },
  "grant.expiring": {
    data: GrantExpiring,
    emitted: true,
    description: "A live grant expires in 7 days, then in 1 day (D21); once each, with what is free of it now."
  },
  "grant.expired": {
    data: GrantEnded,
    emitted: true,
    description: "A grant expired (D21): its credit_expired entry and the grant; what open holds earmarked on " +
      "it expires as they release it."
  },
  "grant.voided": {
    data: GrantEnded,
    emitted: true,
    description: "An administrator voided a grant (POST /developer/account/wallet/grants/{id}/void): its " +
      "credit_voided entry and the grant."
  },
  "webhook_endpoint.disabled": {
    data: WebhookEndpointDisabled,
    emitted: true,
    description: "A webhook endpoint was disabled (a 410, or only failures for 5 days)."
  },
  "limits.updated": {
    data: LimitsUpdated,
    emitted: true,
    description: "The limits were replaced (PUT /developer/account/limits): the administrator's user_id, the new " +
      "version and the list as saved."
  },
  "settings.updated": {
    data: SettingsUpdated,
    emitted: true,
    description: "The account's settings were saved (PUT /developer/account/settings): the administrator's " +
      "user_id, the time zone, the week start and the new version."
  },
  "limit.raise_requested": {
    data: LimitRaiseRequested,
    emitted: true,
    description: "A member asked for a temporary raise of a spend limit (POST /developer/account/limits/" +
      "raise-requests): the pending request."
  },
  "limit.raise_decided": {
    data: LimitRaiseDecided,
    emitted: true,
    description: "An administrator approved or declined a raise request: the decision and the decided request; " +
      "an approval's limits.updated is in the same transaction."
  }
} as const

export type Catalog = typeof catalog
export type EventType = keyof Catalog
export type EventData<T extends EventType> = Schema.Schema.Type<Catalog[T]["data"]>

export const eventTypes = Object.keys(catalog) as ReadonlyArray<EventType>

export const isEventType = (value: string): value is EventType => Object.hasOwn(catalog, value)

/** A type of the catalog with its data: what a writer appends, encoded by the catalog's schema of that type. */
const payloadOf = <T extends EventType>(type: T) =>
  Schema.Struct({ type: Schema.Literal(type), data: catalog[type].data })

export const NewEvent = Schema.Union(
  payloadOf("wallet.budget_set"),
  payloadOf("wallet.credit_added"),
  payloadOf("wallet.balance_low"),
  payloadOf("wallet.balance_recovered"),
  payloadOf("wallet.depleted"),
  payloadOf("session.closed"),
  payloadOf("session.cap_reached"),
  payloadOf("limit.reached"),
  payloadOf("limit.approaching"),
  payloadOf("grant.expiring"),
  payloadOf("grant.expired"),
  payloadOf("grant.voided"),
  payloadOf("webhook_endpoint.disabled"),
  payloadOf("limits.updated"),
  payloadOf("settings.updated"),
  payloadOf("limit.raise_requested"),
  payloadOf("limit.raise_decided")
)
export type NewEvent = typeof NewEvent.Type

/** An event as clients see it (D17): `{ id, type, created_at, data }`, one schema per type. */
const envelopeOf = <T extends EventType>(type: T) =>
  Schema.Struct({
    id: Schema.String,
    type: Schema.Literal(type),
    created_at: Schema.DateTimeUtc,
    data: catalog[type].data
  }).annotations({ identifier: `Event_${type.replace(/[^a-z]+/g, "_")}`, description: catalog[type].description })

export const Event = Schema.Union(
  envelopeOf("wallet.budget_set"),
  envelopeOf("wallet.credit_added"),
  envelopeOf("wallet.balance_low"),
  envelopeOf("wallet.balance_recovered"),
  envelopeOf("wallet.depleted"),
  envelopeOf("session.closed"),
  envelopeOf("session.cap_reached"),
  envelopeOf("limit.reached"),
  envelopeOf("limit.approaching"),
  envelopeOf("grant.expiring"),
  envelopeOf("grant.expired"),
  envelopeOf("grant.voided"),
  envelopeOf("webhook_endpoint.disabled"),
  envelopeOf("limits.updated"),
  envelopeOf("settings.updated"),
  envelopeOf("limit.raise_requested"),
  envelopeOf("limit.raise_decided")
).annotations({ identifier: "Event" })
export type Event = typeof Event.Type

/** A page of the event log, oldest first, or the newest events, newest first (D17). */
export const EventPage = Schema.Struct({
  events: Schema.Array(Event),
  /** The id to pass as `after` for the next page; null when this page reaches the newest event, and for the newest. */
  next_after: Schema.NullOr(Schema.String)
}).annotations({ identifier: "EventPage" })

/**
 * How the pull reads the log: `oldest` first, paging forward with `after` (a poller's way), or
 * the `newest` events, newest first, in one page (what an overview shows). The log's order
 * either way: the events' positions, which follow commit order per account.
 */
export const EventOrder = Schema.Literal("oldest", "newest")
export type EventOrder = typeof EventOrder.Type
/** What the pull reads when no order is asked for: the order it always had. */
export const DEFAULT_EVENT_ORDER: EventOrder = "oldest"

/** Events are kept this long (D17); older ones are pruned. */
export const EVENTS_KEPT_DAYS = 30

/** The bounds on live streams open at once on one API process (D17), by the names a 429 gives them. */
export const STREAM_BOUNDS = {
  perUser: "event_streams_per_user",
  perAccount: "event_streams_per_account"
} as const

/** Most thresholds an account may save (D17). */
export const MAX_THRESHOLDS = 10

/** The account's alert thresholds (D17), versioned as D5: version 0 and none until saved. */
export const AlertsRecord = Schema.Struct({
  version: Schema.Int,
  thresholds: Schema.Array(Threshold),
  updated_at: Schema.NullOr(Schema.DateTimeUtc)
}).annotations({ identifier: "AlertsRecord" })
export type AlertsRecord = typeof AlertsRecord.Type

/**
 * The live stream's change notice (D17, "change notices"): sent on a stream opened with
 * `notices=wallet`, at most every 250 ms per account, after the account's wallet was written (a
 * reserve, a spend, a release, an expiry, a budget, a credit). Not an event: no id, nothing
 * stored in the log, never delivered to a webhook; it tells a reader to read the wallet (and
 * what moves with it) again.
 */
export const WALLET_CHANGED_NOTICE = "wallet.changed"

/** What a stream may be asked to carry beside the events: `wallet`, the wallet's change notices. */
export const StreamNotices = Schema.Literal("wallet")
