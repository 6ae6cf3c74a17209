import { SqlClient, SqlSchema, type Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKey } from "../Domain/Account.js"
import { EVENTS_KEPT_DAYS, Threshold } from "../Domain/Events.js"
import { orDefect } from "../Sql/Errors.js"

/** `bigint` positions arrive from `pg` as strings; they stay far below 2^53. */
const Position = Schema.NumberFromString.pipe(Schema.int())

/** An event to append: its account, type and data as the JSON text the catalog's schema encoded. */
export const NewEventRow = Schema.Struct({
  ...AccountKey.fields,
  type: Schema.String,
  data: Schema.String
})
export type NewEventRow = typeof NewEventRow.Type

const AppendedEvent = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  position: Position,
  created_at: Schema.DateTimeUtcFromDate
})

/** An event as read back; `data` as `pg` parsed it from the json column, keys in the order written. */
export const EventRow = Schema.Struct({
  id: Schema.String,
  position: Position,
  type: Schema.String,
  created_at: Schema.DateTimeUtcFromDate,
  data: Schema.Unknown
})
export type EventRow = typeof EventRow.Type

export const AlertsRow = Schema.Struct({
  version: Schema.Int,
  thresholds: Schema.Array(Threshold),
  updated_at: Schema.DateTimeUtcFromDate
})
export type AlertsRow = typeof AlertsRow.Type

/** The event log and the alert thresholds: SQL only, no decisions. */
export class EventsRepo extends Effect.Service<EventsRepo>()("Events/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * Appends events in the caller's transaction, as CTEs (ending in `events_added`) that a
     * statement runs in one go whatever their number or accounts: alone (`append`) or beside the
     * writes of the change that caused them (the settlement batch). Each account's head row is
     * advanced (and so locked until the transaction ends) first, in the order of the account ids,
     * so that two transactions appending for overlapping accounts never deadlock, and positions
     * follow commit order per account.
     */
    const appending = (events: ReadonlyArray<NewEventRow>): Statement.Fragment =>
      sql`events_input AS (
              SELECT * FROM unnest(
                ${events.map((e) => e.account_kind)}::account_kind[], ${events.map((e) => e.account_id)}::uuid[],
                ${events.map((e) => e.type)}::text[], ${events.map((e) => e.data)}::text[]
              ) WITH ORDINALITY AS e (account_kind, account_id, type, data, n)
            ),
            events_counts AS (
              SELECT account_kind, account_id, count(*) AS added FROM events_input GROUP BY account_kind, account_id
            ),
            events_heads AS (
              INSERT INTO account_event_heads (account_kind, account_id, last_position)
              SELECT account_kind, account_id, added FROM events_counts ORDER BY account_id
              ON CONFLICT (account_kind, account_id)
                DO UPDATE SET last_position = account_event_heads.last_position + EXCLUDED.last_position
              RETURNING account_kind, account_id, last_position
            ),
            events_added AS (
            INSERT INTO account_events (account_kind, account_id, position, type, data)
            SELECT i.account_kind, i.account_id,
              h.last_position - c.added + row_number() OVER (PARTITION BY i.account_kind, i.account_id ORDER BY i.n),
              i.type, i.data::json
            FROM events_input i
              JOIN events_counts c USING (account_kind, account_id)
              JOIN events_heads h USING (account_kind, account_id)
            ORDER BY i.n
            RETURNING id, account_id, position, created_at
            )`

    /** `appending` on its own: the events as added, in the order given. */
    const append = SqlSchema.findAll({
      Request: Schema.Array(NewEventRow),
      Result: AppendedEvent,
      execute: (events) => sql`WITH ${appending(events)} SELECT * FROM events_added`
    })

    /** The position of an event of the account, if it has one by that id (and it is not pruned). */
    const findPosition = SqlSchema.findOne({
      Request: Schema.Struct({ ...AccountKey.fields, id: Schema.UUID }),
      Result: Schema.Struct({ position: Position }),
      execute: ({ account_id, account_kind, id }) =>
        sql`SELECT position FROM account_events
            WHERE id = ${id} AND account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /** The account's events after a position, oldest first, optionally of one type: keyset paging on the position index. */
    const after = SqlSchema.findAll({
      Request: Schema.Struct({
        ...AccountKey.fields,
        position: Schema.Int,
        type: Schema.NullOr(Schema.String),
        limit: Schema.Int
      }),
      Result: EventRow,
      execute: ({ account_id, account_kind, limit, position, type }) =>
        sql`SELECT id, position, type, created_at, data FROM account_events
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND position > ${position}
              ${type === null ? sql`` : sql`AND type = ${type}`}
            ORDER BY position
            LIMIT ${limit}`
    })

    /**
     * The account's newest events, newest first, optionally of one type: the position index read
     * backward from the account's end, so its cost is the page's, not the log's.
     */
    const newest = SqlSchema.findAll({
      Request: Schema.Struct({ ...AccountKey.fields, type: Schema.NullOr(Schema.String), limit: Schema.Int }),
      Result: EventRow,
      execute: ({ account_id, account_kind, limit, type }) =>
        sql`SELECT id, position, type, created_at, data FROM account_events
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}
              ${type === null ? sql`` : sql`AND type = ${type}`}
            ORDER BY position DESC
            LIMIT ${limit}`
    })

    /**
     * Several accounts' events, each after its own position, oldest first and up to `limit` an
     * account, in one statement: a relay round's read.
     */
    const afterEach = SqlSchema.findAll({
      Request: Schema.Struct({
        from: Schema.Array(Schema.Struct({ ...AccountKey.fields, position: Schema.Int })),
        limit: Schema.Int
      }),
      Result: Schema.Struct({ ...AccountKey.fields, ...EventRow.fields }),
      execute: ({ from, limit }) =>
        sql`SELECT c.account_kind, c.account_id, e.id, e.position, e.type, e.created_at, e.data
            FROM unnest(${from.map((f) => f.account_kind)}::account_kind[], ${from.map((f) => f.account_id)}::uuid[],
                        ${from.map((f) => f.position)}::bigint[]) AS c (account_kind, account_id, position)
            CROSS JOIN LATERAL (
              SELECT id, position, type, created_at, data FROM account_events
              WHERE account_kind = c.account_kind AND account_id = c.account_id AND position > c.position
              ORDER BY position
              LIMIT ${limit}
            ) e
            ORDER BY c.account_kind, c.account_id, e.position`
    })

    /** The newest position of the account's log (0 when it has none): where a stream opened without Last-Event-ID starts. */
    const lastPosition = SqlSchema.single({
      Request: AccountKey,
      Result: Schema.Struct({ position: Position }),
      execute: ({ account_id, account_kind }) =>
        sql`SELECT coalesce(max(last_position), 0)::text AS position FROM account_event_heads
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /**
     * Deletes up to `limit` events older than the days they are kept, oldest first; the rows any
     * other pruner holds are skipped, so processes pruning at once do not wait on each other.
     */
    const prune = SqlSchema.single({
      Request: Schema.Int,
      Result: Schema.Struct({ deleted: Schema.Int }),
      execute: (limit) =>
        sql`WITH old AS (
              SELECT id FROM account_events
              WHERE created_at < now() - make_interval(days => ${EVENTS_KEPT_DAYS})
              ORDER BY created_at
              LIMIT ${limit}
              FOR UPDATE SKIP LOCKED
            ), gone AS (
              DELETE FROM account_events WHERE id IN (SELECT id FROM old) RETURNING 1
            )
            SELECT count(*)::int AS deleted FROM gone`
    })

    const findAlerts = SqlSchema.findOne({
      Request: AccountKey,
      Result: AlertsRow,
      execute: ({ account_id, account_kind }) =>
        sql`SELECT version, thresholds, updated_at FROM account_alerts
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /** The first save (expected version 0): nothing when a concurrent first save won. */
    const insertAlerts = SqlSchema.findOne({
      Request: Schema.Struct({ ...AccountKey.fields, thresholds: Schema.parseJson(Schema.Array(Threshold)) }),
      Result: AlertsRow,
      execute: ({ account_id, account_kind, thresholds }) =>
        sql`INSERT INTO account_alerts (account_kind, account_id, version, thresholds)
            VALUES (${account_kind}, ${account_id}, 1, ${thresholds}::json)
            ON CONFLICT DO NOTHING
            RETURNING version, thresholds, updated_at`
    })

    /** A later save: nothing unless the stored version is still the expected one. */
    const updateAlerts = SqlSchema.findOne({
      Request: Schema.Struct({
        ...AccountKey.fields,
        thresholds: Schema.parseJson(Schema.Array(Threshold)),
        expected_version: Schema.Int
      }),
      Result: AlertsRow,
      execute: ({ account_id, account_kind, expected_version, thresholds }) =>
        sql`UPDATE account_alerts SET version = version + 1, thresholds = ${thresholds}::json, updated_at = now()
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND version = ${expected_version}
            RETURNING version, thresholds, updated_at`
    })

    return {
      append: orDefect(append),
      findPosition: orDefect(findPosition),
      after: orDefect(after),
      newest: orDefect(newest),
      afterEach: orDefect(afterEach),
      lastPosition: orDefect(lastPosition),
      prune: orDefect(prune),
      findAlerts: orDefect(findAlerts),
      appending,
      insertAlerts: orDefect(insertAlerts),
      updateAlerts: orDefect(updateAlerts)
    } as const
  })
}) {}
