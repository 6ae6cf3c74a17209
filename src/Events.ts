import { DateTime, Effect, Option, Schema } from "effect"
import { type Account, accountKey, isUuid } from "./Domain/Account.js"
import { EventNotFound, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import { type AlertsRecord, type EventOrder, type EventType, NewEvent, type Threshold } from "./Domain/Events.js"
import { type EventRow, EventsRepo } from "./Events/Repo.js"

const encodeEvent = Schema.encodeSync(NewEvent)

/** An event as the API sends it (D17): the log's row with its time in ISO 8601 and its data as written. */
export interface WireEvent {
  readonly id: string
  readonly type: string
  readonly created_at: string
  readonly data: unknown
}

export const wireEvent = (row: EventRow): WireEvent => ({
  id: row.id,
  type: row.type,
  created_at: DateTime.formatIso(row.created_at),
  data: row.data
})

const eventNotFound = () =>
  new EventNotFound({ detail: "No event of this account has the id given (events are kept 30 days)." })

/** Nothing saved is version 0 (D5). */
const alertsRecord = (
  row: Option.Option<{ version: number; thresholds: ReadonlyArray<Threshold>; updated_at: DateTime.Utc }>
): AlertsRecord =>
  Option.match(row, {
    onNone: () => ({ version: 0, thresholds: [], updated_at: null }),
    onSome: ({ thresholds, updated_at, version }) => ({ version, thresholds, updated_at })
  })

/**
 * The per-account event log (D17): appended by the writers of the changes that cause events, in
 * their own transactions (an outbox), and read by the pull (oldest or newest first) and the live
 * stream. And the alert thresholds the wallet's writers decide balance events by.
 */
export class Events extends Effect.Service<Events>()("Events", {
  effect: Effect.gen(function*() {
    const repo = yield* EventsRepo

    /**
     * Events as the log stores them (type, and data as the catalog encodes it, as JSON text), for a
     * writer that appends them in its own statement beside the change that caused them: the
     * settlement transition (src/Settlement/Transition.ts).
     */
    const encode = (event: NewEvent): { readonly type: string; readonly data: string } => {
      const { data, type } = encodeEvent(event)
      return { type, data: JSON.stringify(data) }
    }

    /**
     * Appends events to their accounts' logs. Runs in the caller's transaction (the statement
     * joins it), so an event exists exactly when the change that caused it committed; the
     * database announces it to live streams at that commit.
     */
    const append = Effect.fn("Events.append")(
      function*(events: ReadonlyArray<{ readonly account: Account; readonly event: NewEvent }>) {
        if (events.length === 0) return []
        return yield* repo.append(events.map(({ account, event }) => ({ ...accountKey(account), ...encode(event) })))
      }
    )

    /** The account's alert thresholds as saved (none until the first save). */
    const thresholds = (account: Account) =>
      Effect.map(repo.findAlerts(accountKey(account)), (row) => alertsRecord(row).thresholds)

    const getAlerts = Effect.fn("Events.getAlerts")(function*(account: Account) {
      return alertsRecord(yield* repo.findAlerts(accountKey(account)))
    })

    /**
     * Replaces the thresholds if the stored version is still `expectedVersion` (D5): the check and
     * the write are one conditional statement, so of writers racing from one version one wins.
     */
    const replaceAlerts = Effect.fn("Events.replaceAlerts")(
      function*(account: Account, list: ReadonlyArray<Threshold>, expectedVersion: number) {
        const key = accountKey(account)
        const saved = yield* (expectedVersion === 0
          ? repo.insertAlerts({ ...key, thresholds: list })
          : repo.updateAlerts({ ...key, thresholds: list, expected_version: expectedVersion }))
        if (Option.isSome(saved)) return alertsRecord(saved)
        const current = alertsRecord(yield* repo.findAlerts(key))
        return yield* new VersionConflict({
          detail: "The alerts were changed by another writer; read them again.",
          current_version: current.version
        })
      }
    )

    /** Where a reader resumes after `id`: that event's position; 404 when the account has no such event (kept). */
    const positionAfter = Effect.fn("Events.positionAfter")(function*(account: Account, id: Option.Option<string>) {
      if (Option.isNone(id)) return 0
      if (!isUuid(id.value)) return yield* eventNotFound()
      const found = yield* repo.findPosition({ ...accountKey(account), id: id.value })
      return yield* Option.match(found, {
        onNone: () => Effect.fail(eventNotFound()),
        onSome: ({ position }) => Effect.succeed(position)
      })
    })

    /** Up to `limit` events after a position, oldest first. Runs for every page and every wake of a stream: untraced. */
    const read = (
      account: Account,
      from: { readonly position: number; readonly type: EventType | null; readonly limit: number }
    ) => repo.after({ ...accountKey(account), position: from.position, type: from.type, limit: from.limit })

    /** Several accounts' events, each after its own position, up to `limit` an account: a relay round's read, untraced. */
    const readEach = (
      from: ReadonlyArray<{ readonly account: Account; readonly position: number }>,
      limit: number
    ) =>
      repo.afterEach({
        from: from.map(({ account, position }) => ({ ...accountKey(account), position })),
        limit
      })

    /**
     * GET /developer/account/events: oldest first, a page after `after` with the id to continue
     * from when more exist; or newest first, the newest `limit` events in one page, which has no
     * next page (what precedes them is read oldest first, or by the stream's resume).
     */
    const page = Effect.fn("Events.page")(function*(
      account: Account,
      query: {
        readonly after: Option.Option<string>
        readonly limit: number
        readonly type: EventType | null
        readonly order: EventOrder
      }
    ) {
      if (query.order === "newest") {
        if (Option.isSome(query.after)) {
          return yield* ValidationFailed.at(
            "#/query/after",
            "pages only oldest first: leave it out with order=newest, or page with order=oldest"
          )
        }
        const rows = yield* repo.newest({ ...accountKey(account), type: query.type, limit: query.limit })
        return { events: rows.map(wireEvent), next_after: null }
      }
      const position = yield* positionAfter(account, query.after)
      const rows = yield* read(account, { position, type: query.type, limit: query.limit + 1 })
      const events = rows.slice(0, query.limit)
      const last = events[events.length - 1]
      return {
        events: events.map(wireEvent),
        next_after: rows.length > query.limit && last !== undefined ? last.id : null
      }
    })

    /** The newest position of the account's log: a stream opened without Last-Event-ID sends what comes after it. */
    const newestPosition = (account: Account) =>
      Effect.map(repo.lastPosition(accountKey(account)), ({ position }) => position)

    /** Deletes a batch of events past the days they are kept; how many went. */
    const prune = (batch: number) => Effect.map(repo.prune(batch), ({ deleted }) => deleted)

    return {
      append,
      encode,
      thresholds,
      getAlerts,
      replaceAlerts,
      positionAfter,
      read,
      readEach,
      page,
      newestPosition,
      prune
    } as const
  }),
  dependencies: [EventsRepo.Default]
}) {}
