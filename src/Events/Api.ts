import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { EventNotFound, Forbidden, RateLimited, VersionConflict } from "../Domain/Errors.js"
import {
  AlertsRecord,
  DEFAULT_EVENT_ORDER,
  EventOrder,
  EventPage,
  eventTypes,
  isEventType,
  MAX_THRESHOLDS,
  STREAM_BOUNDS,
  StreamNotices,
  ThresholdInput,
  WALLET_CHANGED_NOTICE
} from "../Domain/Events.js"
import { Limit } from "../Domain/Paging.js"
import { problem } from "../Domain/Problem.js"
import { RequestBody } from "../Domain/Strict.js"
import { ExpectedVersion } from "../Domain/Version.js"

export const AlertsRequest = RequestBody("AlertsRequest", {
  thresholds: Schema.Array(ThresholdInput).pipe(
    Schema.maxItems(MAX_THRESHOLDS, { message: () => `must hold at most ${MAX_THRESHOLDS} thresholds` })
  ),
  expected_version: Schema.optionalWith(ExpectedVersion, { exact: true })
})

export const EventsQuery = Schema.Struct({
  after: Schema.optionalWith(
    Schema.String.annotations({
      description: "Returns the events after this one, oldest first; pass the previous page's next_after. " +
        "Only with order=oldest."
    }),
    { exact: true }
  ),
  limit: Limit("events"),
  order: Schema.optionalWith(
    EventOrder.annotations({
      description: "oldest (the default): oldest first, after `after`. newest: the newest `limit` events " +
        "(of `type`, when given), newest first, in one page: it takes no `after`, and next_after is null.",
      default: DEFAULT_EVENT_ORDER,
      message: () => ({ message: `must be ${EventOrder.literals.join(" or ")}`, override: true })
    }),
    // No decoding default: the contract's Effect clients take the decoded side, where it would be required.
    { exact: true }
  ),
  type: Schema.optionalWith(
    Schema.String.pipe(Schema.filter(isEventType)).annotations({
      description: `Only events of this type: one of ${eventTypes.join(", ")}.`,
      jsonSchema: { type: "string", enum: eventTypes },
      message: () => ({ message: `must be one of ${eventTypes.join(", ")}`, override: true })
    }),
    { exact: true }
  )
})

export const StreamQuery = Schema.Struct({
  notices: Schema.optionalWith(
    StreamNotices.annotations({
      description: `wallet: also send a change notice (event: ${WALLET_CHANGED_NOTICE}, no id, data {}) at most ` +
        "every 250 ms after the account's wallet was written; not an event, never stored or delivered to webhooks.",
      message: () => ({ message: "must be wallet", override: true })
    }),
    { exact: true }
  )
})

/** Alert thresholds, the event log and its live stream (D17). */
export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("getAlerts", "/developer/account/alerts")
      .annotate(OpenApi.Summary, "Alert thresholds")
      .annotate(OpenApi.Description, "Version 0 with no thresholds and updated_at null until they are saved.")
      .addSuccess(AlertsRecord)
  )
  .add(
    HttpApiEndpoint.put("replaceAlerts", "/developer/account/alerts")
      .annotate(OpenApi.Summary, "Replace the alert thresholds")
      .annotate(
        OpenApi.Description,
        `Administrators only. At most ${MAX_THRESHOLDS} thresholds, each {amount_usd} or {percent_of_budget: 1..100}; ` +
          "wallet.balance_low and wallet.balance_recovered are sent when available_usd crosses one. " +
          "expected_version is the version last read (omitted means 0); a stale one is 409 version_conflict."
      )
      .setPayload(AlertsRequest)
      .addSuccess(AlertsRecord)
      .addError(problem(Forbidden))
      .addError(problem(VersionConflict))
  )
  .add(
    HttpApiEndpoint.get("listEvents", "/developer/account/events")
      .annotate(OpenApi.Summary, "Events")
      .setUrlParams(EventsQuery)
      .addSuccess(EventPage)
      .addError(problem(EventNotFound))
      .annotate(
        OpenApi.Description,
        "The account's events, oldest first (kept 30 days). next_after, when more events follow, is the after " +
          "of the next page; null means this page reached the newest event (poll again after its last id). " +
          "With order=newest, the newest limit events, newest first, in one request (after is 422 there)."
      )
  )
  .add(
    HttpApiEndpoint.get("streamEvents", "/developer/account/events/stream")
      .annotate(OpenApi.Summary, "Events as they happen (SSE)")
      .setUrlParams(StreamQuery)
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" })))
      .addError(problem(EventNotFound))
      .addError(problem(RateLimited))
      .annotate(
        OpenApi.Description,
        "Server-sent events: for each event, id: its id, event: its type, data: the event as JSON (an Event). " +
          "Send Last-Event-ID to resume after that event from the log without a gap (404 event_not_found when " +
          "it is unknown); without it the stream starts with the next event. A comment line is sent every 15 s. " +
          "An API process holds at most a configured number of streams open per user and per account: past " +
          `either, 429 rate_limited with Retry-After, limit_name (${Object.values(STREAM_BOUNDS).join(" or ")}) ` +
          "and limit. A closed stream frees its place at once; a reader that takes nothing for two heartbeats " +
          "(30 s) is cut off."
      )
  )
  .middleware(Authentication)
{}
