import * as NodeContext from "@effect/platform-node/NodeContext"
import { SqlClient } from "@effect/sql"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer, Redacted } from "effect"
import { createHash } from "node:crypto"
import Pg from "pg"
import { migrations } from "../migrations/index.js"
import { AppConfig } from "./Config.js"

/** What `pg` keeps of a connection's state that tells whether a statement is still running on it. */
interface Wire {
  readonly processID?: unknown
  readonly readyForQuery?: unknown
  readonly connection?: {
    readonly once: (event: "readyForQuery", listener: () => void) => unknown
    readonly off: (event: "readyForQuery", listener: () => void) => unknown
  }
  readonly once: (event: "end" | "error", listener: () => void) => unknown
  readonly off: (event: "end" | "error", listener: () => void) => unknown
}

/** Where `pg` hears the server's error messages, before a statement's callback does. */
interface ServerMessages {
  readonly connection: {
    readonly prependListener: (event: "errorMessage", listener: (message: Pg.DatabaseError) => void) => unknown
  }
}

/**
 * Whether the server is ending the connection with this error: a session-ending severity, or a
 * SQLSTATE a backend sends as it goes (terminated by an administrator, the server shutting down,
 * an idle-session or idle-in-transaction timeout, a connection failure). Severities are
 * translated under some `lc_messages`, so the codes are read as well.
 */
const endsTheSession = ({ code, severity }: Pg.DatabaseError) =>
  severity === "FATAL" || severity === "PANIC" ||
  (code !== undefined && (code.startsWith("08") || code.startsWith("57P") || code === "25P03"))

/**
 * A connection the server has ended never goes back to the pool. When a backend is terminated
 * mid-statement (by an administrator, a failover, a timeout), the statement fails on the server's
 * error and the driver gives the connection back as healthy: `pg` sees the socket close only a
 * moment later, and a statement that was waiting for a connection was handed the dead one in that
 * moment and failed as well, a 503 for a request that had done nothing wrong. Marked when the
 * error arrives, before the statement's callback releases the connection, it is released as failed:
 * the pool closes it and the waiting statement gets a new one.
 */
const retireEndedConnections = (pool: Pg.Pool) =>
  pool.on("connect", (client) => {
    const { connection } = client as unknown as ServerMessages
    connection.prependListener("errorMessage", (message) => {
      if (!endsTheSession(message)) return
      const release = client.release
      client.release = (error) => release(error ?? new Error("the server ended this connection"))
    })
  })

/** The statement `@effect/sql-pg` (3 line) sends on another pooled connection to cancel an interrupted one. */
const CANCEL_STATEMENT = /^SELECT pg_cancel_backend\((\d+)\)$/

/**
 * A pool on which an interrupted statement is never cancelled: it runs to its end (they are short,
 * and lock waits are bounded by the lock timeout), and the interruption waits for it. The driver
 * of the 3 line cancels with `pg_cancel_backend(pid)` over another connection; when the statement
 * had finished first and its connection gone back to the pool, the cancel landed on the next
 * request's statement on that connection, which failed with 57014 (issue 22.5; fixed upstream only
 * in the v4 line). Here that cancel is answered once the connection has no statement in flight,
 * and nothing is sent to the server.
 */
const poolWithoutCancels = (config: Pg.PoolConfig): Pg.Pool => {
  const pool = new Pg.Pool(config)
  const clients = new Set<Wire>()
  pool.on("connect", (client) => clients.add(client as unknown as Wire))
  pool.on("remove", (client) => clients.delete(client as unknown as Wire))
  const query = pool.query.bind(pool) as (...args: ReadonlyArray<unknown>) => unknown
  const intercepted = (...args: ReadonlyArray<unknown>): unknown => {
    const [text, callback] = args
    const target = typeof text === "string" ? CANCEL_STATEMENT.exec(text) : null
    if (target === null || typeof callback !== "function") return query(...args)
    const done = () => callback(null, { rows: [] })
    const client = [...clients].find((candidate) => String(candidate.processID) === target[1])
    if (client === undefined || client.readyForQuery !== false || client.connection === undefined) {
      done()
      return undefined
    }
    const { connection } = client
    // Whichever comes first answers, and takes the other two listeners off: a connection lives
    // for many statements, and each left behind was one more on it (MaxListenersExceededWarning).
    const answer = () => {
      connection.off("readyForQuery", answer)
      client.off("end", answer)
      client.off("error", answer)
      done()
    }
    connection.once("readyForQuery", answer)
    client.once("end", answer)
    client.once("error", answer)
    return undefined
  }
  return Object.assign(pool, { query: intercepted as typeof pool.query })
}

/**
 * The mark a statement's text begins with to be prepared once per connection and reused: sent as
 * a named statement (named by a hash of its text), so PostgreSQL parses and plans it once per
 * connection and, its plans being as good for any parameter, keeps a generic plan after its first
 * executions. The settlement transition's two statements carry it (docs/architecture.md, "The
 * settlement transition").
 *
 * Behind PgBouncer in transaction mode a named statement needs PgBouncer 1.21 or later with
 * `max_prepared_statements` above 0 (D18), which prepares it on whichever server connection a
 * transaction is given. An older pooler, or one with the setting at 0, answers that the statement
 * does not exist (26000) or already exists (42P05), before anything ran: the statement is sent
 * again unnamed, and from then on the pool sends every statement unnamed, planned each time as
 * before.
 */
export const PREPARED = "/* prepared */"

const NAMING_REFUSED = new Set(["26000", "42P05"])

type QueryCallback = (error: (Error & { readonly code?: string }) | null, result: unknown) => void

const preparedStatements = (pool: Pg.Pool) => {
  let named = true
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: ReadonlyArray<unknown>) => unknown
    const intercepted = (...args: ReadonlyArray<unknown>): unknown => {
      const [text, values, callback] = args
      if (!named || typeof text !== "string" || !text.startsWith(PREPARED) || typeof callback !== "function") {
        return query(...args)
      }
      const name = `p_${createHash("sha1").update(text).digest("hex").slice(0, 24)}`
      const answer = callback as QueryCallback
      return query(
        { name, text, values },
        ((error, result) => {
          if (error !== null && error.code !== undefined && NAMING_REFUSED.has(error.code)) {
            named = false
            return query(text, values, callback)
          }
          return answer(error, result)
        }) satisfies QueryCallback
      )
    }
    Object.assign(client, { query: intercepted as typeof client.query })
  })
  return pool
}

/** The pool every repository uses. `numeric` stays a string (pg's default), so money never passes through a float. */
export const SqlLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    PgClient.layerFromPool({
      acquire: Effect.acquireRelease(
        Effect.gen(function*() {
          const pool = preparedStatements(retireEndedConnections(poolWithoutCancels({
            connectionString: Redacted.value(config.databaseUrl),
            max: config.databasePoolSize,
            idleTimeoutMillis: 60_000,
            connectionTimeoutMillis: 5_000,
            application_name: "account-api"
          })))
          pool.on("error", () => {})
          yield* Effect.tryPromise({
            try: () => pool.query("SELECT 1"),
            catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
          }).pipe(
            Effect.timeoutFail({
              duration: "5 seconds",
              onTimeout: () =>
                new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
            }),
            Effect.tapError(() => Effect.promise(() => pool.end()))
          )
          return pool
        }),
        (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption("1 second"))
      ),
      applicationName: "account-api"
    }))
)

/** The cheapest statement the server must answer: readiness asks it (D9). */
export const ping = (sql: SqlClient.SqlClient) => sql`SELECT 1`

/** The server's clock as a statement sees it, to compare with `quietSince`'s. */
export const serverNow = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly now: string }>`SELECT statement_timestamp()::text AS now`,
    (rows) => rows[0]?.now ?? ""
  )

/**
 * How many connections to this database named `applicationName` have begun no statement since
 * `since` (a `serverNow`). One whose statements PostgreSQL does not show this role (another
 * role's, without pg_read_all_stats) counts as quiet: it is not known to have begun one.
 */
export const quietSince = (sql: SqlClient.SqlClient, applicationName: string, since: string) =>
  Effect.map(
    sql<{ readonly count: number }>`
      SELECT count(*)::int AS count FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = ${applicationName}
        AND (query_start IS NULL OR query_start < ${since}::timestamptz)`,
    (rows) => rows[0]?.count ?? 0
  )

/** A fixed key for the advisory lock under which the migrations table is first created. */
const MIGRATION_LOCK_KEY = 727_001

/**
 * Whether every migration this build knows is recorded. Then starting up creates and locks
 * nothing, which the API's and worker's role, allowed rows but no DDL (D14), could not do.
 */
const isCurrent = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [table] = yield* sql<{ readonly present: boolean }>`
    SELECT to_regclass('effect_sql_migrations') IS NOT NULL AS present`
  if (table?.present !== true) return false
  const rows = yield* sql<{ readonly migration_id: number }>`SELECT migration_id FROM effect_sql_migrations`
  const applied = new Set(rows.map((row) => row.migration_id))
  return Object.keys(migrations).every((name) => applied.has(Number(name.split("_")[0])))
})

/**
 * Runs pending migrations and returns their names. The migrator serialises
 * runs with `LOCK TABLE` on its table, but creates that table unguarded; two
 * processes starting at once on a fresh database would race there, so the
 * table (in the migrator's own shape) is created first under an advisory lock.
 */
export const migrate = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if (yield* isCurrent) return []
  yield* sql.withTransaction(Effect.zipRight(
    sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`,
    sql`CREATE TABLE IF NOT EXISTS effect_sql_migrations (
          migration_id integer PRIMARY KEY,
          created_at timestamp with time zone NOT NULL DEFAULT now(),
          name text NOT NULL
        )`
  ))
  const applied = yield* PgMigrator.run({ loader: PgMigrator.fromRecord(migrations) })
  return applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`)
}).pipe(Effect.provide(NodeContext.layer))

/**
 * One connection to PostgreSQL itself (`DATABASE_DIRECT_URL`), for the migrations only: a
 * pooler in transaction mode stands between the service and the database for the rest (D18).
 */
const DirectSqlLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    PgClient.layer({
      url: config.databaseDirectUrl,
      maxConnections: 1,
      connectTimeout: "5 seconds",
      applicationName: "account-api:migrate"
    }))
)

/**
 * Migrates as the layer builds, so nothing serves before the schema is current, over a
 * direct connection closed once done.
 */
export const MigrationsLive = Layer.effectDiscard(Effect.scoped(Effect.provide(migrate, DirectSqlLive)))

/** The SQL client, handed out only once the schema is current. */
export const DatabaseLive = SqlLive.pipe(Layer.provideMerge(MigrationsLive))
