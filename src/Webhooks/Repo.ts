import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKey, AccountKind } from "../Domain/Account.js"
import { EVENTS_KEPT_DAYS } from "../Domain/Events.js"
import { orDefect } from "../Sql/Errors.js"

const EndpointKey = Schema.Struct({ ...AccountKey.fields, id: Schema.UUID })

/** `bigint` positions arrive from `pg` as strings; they stay far below 2^53. */
const Position = Schema.NumberFromString.pipe(Schema.int())

const Types = Schema.NullOr(Schema.Array(Schema.String))

export const EndpointRow = Schema.Struct({
  id: Schema.String,
  account_kind: AccountKind,
  account_id: Schema.String,
  url: Schema.String,
  description: Schema.NullOr(Schema.String),
  types: Types,
  enabled: Schema.Boolean,
  disabled_reason: Schema.NullOr(Schema.String),
  created_at: Schema.DateTimeUtcFromDate,
  updated_at: Schema.DateTimeUtcFromDate
})
export type EndpointRow = typeof EndpointRow.Type

/** What a delivery needs of its endpoint: where, and the secrets that sign (the previous one only while it overlaps). */
export const SigningRow = Schema.Struct({
  ...EndpointRow.fields,
  secrets: Schema.Array(Schema.String),
  failing_since: Schema.NullOr(Schema.DateTimeUtcFromDate)
})
export type SigningRow = typeof SigningRow.Type

/** What an attempt to deliver an event records, as written and as read back. */
const attemptFields = {
  event_id: Schema.String,
  event_type: Schema.String,
  attempt: Schema.Int,
  outcome: Schema.String,
  status_code: Schema.NullOr(Schema.Int),
  duration_ms: Schema.Int,
  error: Schema.NullOr(Schema.String)
}

export const DeliveryRow = Schema.Struct({
  id: Schema.String,
  ...attemptFields,
  next_attempt_at: Schema.NullOr(Schema.DateTimeUtcFromDate),
  attempted_at: Schema.DateTimeUtcFromDate
})

/** Where the relay stands in an account's log: every event at or before `position` has its delivery jobs. */
export const Cursor = Schema.Struct({ ...AccountKey.fields, position: Position })
export type Cursor = typeof Cursor.Type

/** One attempt to deliver an event to an endpoint, as it is recorded (`next_attempt_ms` from now, when retried). */
export const AttemptRow = Schema.Struct({
  endpoint_id: Schema.String,
  ...attemptFields,
  next_attempt_ms: Schema.NullOr(Schema.Int)
})
export type AttemptRow = typeof AttemptRow.Type

const ENDPOINT_COLUMNS =
  "id, account_kind, account_id, url, description, types, enabled, disabled_reason, created_at, updated_at"

/** Webhook endpoints, the relay's cursors and the delivery attempts: SQL only, no decisions. */
export class WebhooksRepo extends Effect.Service<WebhooksRepo>()("Webhooks/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal(ENDPOINT_COLUMNS)

    /**
     * The account's relay cursor, made at `position` (the log's newest, so an endpoint gets what
     * is committed after it exists) if it has none, and locked until the transaction ends: the
     * endpoint writes of one account take it first, so the count of ten holds under races.
     */
    const lockAccount = SqlSchema.void({
      Request: Schema.Struct({ ...AccountKey.fields, position: Schema.Int }),
      execute: ({ account_id, account_kind, position }) =>
        sql`INSERT INTO webhook_relay_cursors (account_kind, account_id, position)
            VALUES (${account_kind}, ${account_id}, ${position})
            ON CONFLICT (account_kind, account_id) DO UPDATE SET position = webhook_relay_cursors.position`
    })

    /** How many endpoints the account has: a statement of its own after `lockAccount`, so it sees what committed before the lock was granted. */
    const count = SqlSchema.single({
      Request: AccountKey,
      Result: Schema.Struct({ endpoints: Schema.Int }),
      execute: ({ account_id, account_kind }) =>
        sql`SELECT count(*)::int AS endpoints FROM webhook_endpoints
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    const insert = SqlSchema.single({
      Request: Schema.Struct({
        ...AccountKey.fields,
        url: Schema.String,
        description: Schema.NullOr(Schema.String),
        types: Types,
        secret: Schema.String
      }),
      Result: EndpointRow,
      execute: ({ account_id, account_kind, description, secret, types, url }) =>
        sql`INSERT INTO webhook_endpoints (account_kind, account_id, url, description, types, secret)
            VALUES (${account_kind}, ${account_id}, ${url}, ${description},
                    ${types === null ? null : [...types]}::text[], ${secret})
            RETURNING ${columns}`
    })

    const list = SqlSchema.findAll({
      Request: AccountKey,
      Result: EndpointRow,
      execute: ({ account_id, account_kind }) =>
        sql`SELECT ${columns} FROM webhook_endpoints
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} ORDER BY id`
    })

    const find = SqlSchema.findOne({
      Request: EndpointKey,
      Result: EndpointRow,
      execute: ({ account_id, account_kind, id }) =>
        sql`SELECT ${columns} FROM webhook_endpoints
            WHERE id = ${id} AND account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /** Sets what is given; enabling again clears why it was disabled and its run of failures. */
    const update = SqlSchema.findOne({
      Request: Schema.Struct({
        ...EndpointKey.fields,
        url: Schema.optional(Schema.String),
        description: Schema.optional(Schema.NullOr(Schema.String)),
        types: Schema.optional(Types),
        enabled: Schema.optional(Schema.Boolean)
      }),
      Result: EndpointRow,
      execute: ({ account_id, account_kind, description, enabled, id, types, url }) =>
        sql`UPDATE webhook_endpoints SET
              url = ${url === undefined ? sql`url` : sql`${url}`},
              description = ${description === undefined ? sql`description` : sql`${description}`},
              types = ${types === undefined ? sql`types` : types === null ? sql`NULL` : sql`${[...types]}::text[]`},
              enabled = ${enabled === undefined ? sql`enabled` : sql`${enabled}`},
              disabled_reason = ${enabled === true ? sql`NULL` : sql`disabled_reason`},
              failing_since = ${enabled === true ? sql`NULL` : sql`failing_since`},
              updated_at = now()
            WHERE id = ${id} AND account_kind = ${account_kind} AND account_id = ${account_id}
            RETURNING ${columns}`
    })

    const remove = SqlSchema.findOne({
      Request: EndpointKey,
      Result: Schema.Struct({ id: Schema.String }),
      execute: ({ account_id, account_kind, id }) =>
        sql`DELETE FROM webhook_endpoints
            WHERE id = ${id} AND account_kind = ${account_kind} AND account_id = ${account_id}
            RETURNING id`
    })

    /** The new secret signs from now; the current one beside it until `overlap_ms` from now. */
    const rotate = SqlSchema.findOne({
      Request: Schema.Struct({ ...EndpointKey.fields, secret: Schema.String, overlap_ms: Schema.Int }),
      Result: Schema.Struct({ previous_secret_until: Schema.DateTimeUtcFromDate }),
      execute: ({ account_id, account_kind, id, overlap_ms, secret }) =>
        sql`UPDATE webhook_endpoints SET
              previous_secret = secret, secret = ${secret},
              previous_secret_until = now() + make_interval(secs => ${overlap_ms / 1000}), updated_at = now()
            WHERE id = ${id} AND account_kind = ${account_kind} AND account_id = ${account_id}
            RETURNING previous_secret_until`
    })

    /** Endpoints by id alone, for a batch of deliveries: their secrets that sign now. */
    const forDeliveries = SqlSchema.findAll({
      Request: Schema.Array(Schema.UUID),
      Result: SigningRow,
      execute: (ids) =>
        sql`SELECT ${columns}, failing_since,
              CASE WHEN previous_secret IS NOT NULL AND previous_secret_until > now()
                THEN ARRAY[secret, previous_secret] ELSE ARRAY[secret] END AS secrets
            FROM webhook_endpoints WHERE id = ANY(${[...new Set(ids)]}::uuid[])`
    })

    /** The enabled endpoints of accounts: those a relay round (or a redelivery) hands events to. */
    const enabledOf = SqlSchema.findAll({
      Request: Schema.Array(AccountKey),
      Result: EndpointRow,
      execute: (keys) =>
        sql`SELECT ${columns} FROM webhook_endpoints
            WHERE (account_kind, account_id) IN (
              SELECT * FROM unnest(${keys.map((k) => k.account_kind)}::account_kind[],
                                   ${keys.map((k) => k.account_id)}::uuid[]))
              AND enabled
            ORDER BY id`
    })

    /** Disables an enabled endpoint; nothing when it already was (or is gone), so one event says so. */
    const disable = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.UUID, reason: Schema.String }),
      Result: EndpointRow,
      execute: ({ id, reason }) =>
        sql`UPDATE webhook_endpoints SET enabled = false, disabled_reason = ${reason}, updated_at = now()
            WHERE id = ${id} AND enabled
            RETURNING ${columns}`
    })

    /** A failed attempt: when the run of failures began (now, if this is its first). */
    const failed = SqlSchema.single({
      Request: Schema.UUID,
      Result: Schema.Struct({ failing_since: Schema.DateTimeUtcFromDate }),
      execute: (id) =>
        sql`UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, now())
            WHERE id = ${id} RETURNING failing_since`
    })

    const succeeded = SqlSchema.void({
      Request: Schema.UUID,
      execute: (id) =>
        sql`UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ${id} AND failing_since IS NOT NULL`
    })

    /**
     * Records a batch of attempts in one statement, in their order (their ids follow it); an
     * attempt of an endpoint deleted meanwhile is dropped with it.
     */
    const recordAttempts = SqlSchema.void({
      Request: Schema.Array(AttemptRow),
      execute: (rows) =>
        sql`INSERT INTO webhook_deliveries
              (endpoint_id, event_id, event_type, attempt, outcome, status_code, duration_ms, error, next_attempt_at)
            SELECT a.endpoint_id, a.event_id, a.event_type, a.attempt, a.outcome, a.status_code, a.duration_ms, a.error,
              now() + make_interval(secs => a.next_attempt_ms / 1000.0)
            FROM unnest(
              ${rows.map((r) => r.endpoint_id)}::uuid[], ${rows.map((r) => r.event_id)}::uuid[],
              ${rows.map((r) => r.event_type)}::text[], ${rows.map((r) => r.attempt)}::int[],
              ${rows.map((r) => r.outcome)}::text[], ${rows.map((r) => r.status_code)}::int[],
              ${rows.map((r) => r.duration_ms)}::int[], ${rows.map((r) => r.error)}::text[],
              ${rows.map((r) => r.next_attempt_ms)}::bigint[]
            ) WITH ORDINALITY AS a (endpoint_id, event_id, event_type, attempt, outcome, status_code, duration_ms,
              error, next_attempt_ms, n)
            WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = a.endpoint_id)
            ORDER BY a.n`
    })

    const deliveries = SqlSchema.findAll({
      Request: Schema.Struct({ endpoint_id: Schema.String, limit: Schema.Int }),
      Result: DeliveryRow,
      execute: ({ endpoint_id, limit }) =>
        sql`SELECT id, event_id, event_type, attempt, outcome, status_code, duration_ms, error, next_attempt_at,
              attempted_at
            FROM webhook_deliveries WHERE endpoint_id = ${endpoint_id} ORDER BY id DESC LIMIT ${limit}`
    })

    /**
     * Deletes up to `limit` delivery attempts older than the days events are kept (their event is
     * gone from the log by then); rows another pruner holds are skipped.
     */
    const pruneDeliveries = SqlSchema.single({
      Request: Schema.Int,
      Result: Schema.Struct({ deleted: Schema.Int }),
      execute: (limit) =>
        sql`WITH old AS (
              SELECT id FROM webhook_deliveries
              WHERE attempted_at < now() - make_interval(days => ${EVENTS_KEPT_DAYS})
              ORDER BY id
              LIMIT ${limit}
              FOR UPDATE SKIP LOCKED
            ), gone AS (
              DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM old) RETURNING 1
            )
            SELECT count(*)::int AS deleted FROM gone`
    })

    /** Every account the relay follows. */
    const cursors = SqlSchema.findAll({
      Request: Schema.Void,
      Result: AccountKey,
      execute: () => sql`SELECT account_kind, account_id FROM webhook_relay_cursors`
    })

    /**
     * The cursors of several accounts, locked for a relay round's transaction; an account without
     * one, or whose cursor another relay holds (it is relaying that account right now), is left out.
     */
    const lockCursors = SqlSchema.findAll({
      Request: Schema.Array(AccountKey),
      Result: Cursor,
      execute: (keys) =>
        sql`SELECT account_kind, account_id, position::text AS position FROM webhook_relay_cursors
            WHERE (account_kind, account_id) IN (
              SELECT * FROM unnest(${keys.map((k) => k.account_kind)}::account_kind[],
                                   ${keys.map((k) => k.account_id)}::uuid[]))
            ORDER BY account_kind, account_id
            FOR UPDATE SKIP LOCKED`
    })

    /** Moves cursors forward (never back) to where a relay round's jobs end. */
    const advanceCursors = SqlSchema.void({
      Request: Schema.Array(Cursor),
      execute: (cursors) =>
        sql`UPDATE webhook_relay_cursors c SET position = greatest(c.position, n.position)
            FROM unnest(${cursors.map((k) => k.account_kind)}::account_kind[],
                        ${cursors.map((k) => k.account_id)}::uuid[],
                        ${cursors.map((k) => k.position)}::bigint[]) AS n (account_kind, account_id, position)
            WHERE c.account_kind = n.account_kind AND c.account_id = n.account_id`
    })

    /** Every cursor with where it stands, for the relay's lag. */
    const cursorPositions = SqlSchema.findAll({
      Request: Schema.Void,
      Result: Cursor,
      execute: () => sql`SELECT account_kind, account_id, position::text AS position FROM webhook_relay_cursors`
    })

    return {
      lockAccount: orDefect(lockAccount),
      count: orDefect(count),
      insert: orDefect(insert),
      list: orDefect(list),
      find: orDefect(find),
      update: orDefect(update),
      remove: orDefect(remove),
      rotate: orDefect(rotate),
      forDeliveries: orDefect(forDeliveries),
      enabledOf: orDefect(enabledOf),
      disable: orDefect(disable),
      failed: orDefect(failed),
      succeeded: orDefect(succeeded),
      recordAttempts: orDefect(recordAttempts),
      deliveries: orDefect(deliveries),
      cursors: orDefect(cursors),
      pruneDeliveries: orDefect(pruneDeliveries),
      lockCursors: orDefect(lockCursors),
      advanceCursors: orDefect(advanceCursors),
      cursorPositions: orDefect(cursorPositions)
    } as const
  })
}) {}
