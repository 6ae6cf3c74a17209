import { Schema } from "effect"
import * as Money from "./Money.js"
import { RequestBody } from "./Strict.js"
import { Instant } from "./Time.js"

// Limit raise requests (D22, docs/decisions/D22-limits-where-people-live.md#raise-requests): a
// member asks for a temporary raise of a spend limit (D19's `raise`), an administrator approves or
// declines it.

/** The most requests an account keeps pending at once (D22). */
export const MAX_PENDING_REQUESTS = 20
/** A reason's length, in characters (Unicode code points). */
export const MAX_REASON = 500
/** The most requests one read lists, newest first. */
export const MAX_LISTED_REQUESTS = 500

const codePoints = (s: string) => [...s].length

/** Why a person asks, or why an administrator declines: 1 to 500 characters. */
export const RaiseReason = Schema.String.pipe(
  Schema.filter(
    (reason) =>
      codePoints(reason) < 1
        ? "must be 1 to 500 characters"
        : codePoints(reason) > MAX_REASON
        ? `must be at most ${MAX_REASON} characters`
        : true,
    { jsonSchema: { minLength: 1, maxLength: MAX_REASON } }
  )
).annotations({
  identifier: "RaiseReason",
  message: () => ({ message: `must be 1 to ${MAX_REASON} characters`, override: true })
})

const RequestedUntil = (description: string) =>
  Instant({ description, message: "must be an RFC 3339 date-time such as 2026-01-31T00:00:00Z" })

/** `POST /developer/account/limits/raise-requests`: any member of the account. */
export const CreateRaiseRequest = RequestBody("CreateRaiseRequest", {
  limit_id: Schema.UUID.annotations({
    description:
      "The spend limit to raise (its id, as GET /developer/account/limits shows it); not a concurrent limit.",
    message: () => ({ message: "must be a limit's id (a UUID)", override: true })
  }),
  amount_usd: Money.PositiveUsdAmount.annotations({ description: "Above the limit's amount_usd." }),
  until: RequestedUntil("When the raise would end (exclusive): in the future, at most 90 days ahead."),
  reason: RaiseReason.annotations({ description: "Why: 1 to 500 characters." })
})
export type CreateRaiseRequest = typeof CreateRaiseRequest.Type

/** `POST …/raise-requests/{id}/approve`: either may be left out, meaning what was asked. */
export const ApproveRaiseRequest = RequestBody("ApproveRaiseRequest", {
  amount_usd: Schema.optionalWith(
    Money.PositiveUsdAmount.annotations({
      description: "At most what was asked and above the limit's amount_usd; what was asked when omitted."
    }),
    { exact: true }
  ),
  until: Schema.optionalWith(
    RequestedUntil("At most what was asked and in the future; what was asked when omitted."),
    { exact: true }
  )
})
export type ApproveRaiseRequest = typeof ApproveRaiseRequest.Type

/** `POST …/raise-requests/{id}/decline`: a reason is optional. */
export const DeclineRaiseRequest = RequestBody("DeclineRaiseRequest", {
  reason: Schema.optionalWith(RaiseReason.annotations({ description: "Why not: 1 to 500 characters." }), {
    exact: true
  })
})
export type DeclineRaiseRequest = typeof DeclineRaiseRequest.Type

export const RaiseRequestState = Schema.Literal("pending", "approved", "declined")
export type RaiseRequestState = typeof RaiseRequestState.Type

/** What `?state=` lists: pending ones (the default), decided ones (approved or declined), or all. */
export const RaiseRequestFilter = Schema.Literal("pending", "decided", "all").annotations({
  message: () => ({ message: "must be \"pending\", \"decided\" or \"all\"", override: true })
})
export type RaiseRequestFilter = typeof RaiseRequestFilter.Type

/** What every request shows beside its id and state, decided or not. */
const askedFields = {
  limit_id: Schema.NullOr(Schema.String).annotations({
    description: "The limit asked about; null once a PUT of the limits removed it."
  }),
  amount_usd: Money.Usd.annotations({ description: "The raised amount asked for." }),
  until: Schema.DateTimeUtc.annotations({ description: "When the raise asked for would end." }),
  reason: Schema.String,
  requested_by: Schema.String.annotations({ description: "The member who asked (a user id)." }),
  created_at: Schema.DateTimeUtc
}

const decidedFields = {
  decided_by: Schema.String.annotations({ description: "The administrator who decided (a user id)." }),
  decided_at: Schema.DateTimeUtc
}

export const PendingRaiseRequest = Schema.Struct({
  id: Schema.String,
  state: Schema.Literal("pending"),
  ...askedFields
}).annotations({ identifier: "PendingRaiseRequest", description: "A request no one has decided yet." })

export const ApprovedRaiseRequest = Schema.Struct({
  id: Schema.String,
  state: Schema.Literal("approved"),
  ...askedFields,
  ...decidedFields,
  approved_amount_usd: Money.Usd.annotations({ description: "The raise's amount as approved: at most amount_usd." }),
  approved_until: Schema.DateTimeUtc.annotations({ description: "The raise's end as approved: at most until." })
}).annotations({
  identifier: "ApprovedRaiseRequest",
  description: "Approved: the limit's raise was set to approved_amount_usd until approved_until."
})

export const DeclinedRaiseRequest = Schema.Struct({
  id: Schema.String,
  state: Schema.Literal("declined"),
  ...askedFields,
  ...decidedFields,
  decline_reason: Schema.NullOr(Schema.String).annotations({
    description: "The administrator's reason; null when none was given."
  })
}).annotations({ identifier: "DeclinedRaiseRequest", description: "Declined: the limit was left as it was." })

/** A request as clients read it: pending, approved or declined, told apart by `state`. */
export const RaiseRequest = Schema.Union(PendingRaiseRequest, ApprovedRaiseRequest, DeclinedRaiseRequest)
  .annotations({ identifier: "RaiseRequest" })
export type RaiseRequest = typeof RaiseRequest.Type

/** A decided request: what `limit.raise_decided` carries. */
export const DecidedRaiseRequest = Schema.Union(ApprovedRaiseRequest, DeclinedRaiseRequest)
export type DecidedRaiseRequest = typeof DecidedRaiseRequest.Type

export const RaiseRequestList = Schema.Struct({
  requests: Schema.Array(RaiseRequest)
}).annotations({ identifier: "RaiseRequestList" })
export type RaiseRequestList = typeof RaiseRequestList.Type
