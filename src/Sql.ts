import * as NodeContext from "@effect/platform-node/NodeContext"
import { SqlClient } from "@effect/sql"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { migrations } from "../migrations/index.js"
import { AppConfig } from "./Config.js"

/** The pool every repository uses. `numeric` stays a string (pg's default), so money never passes through a float. */
export const SqlLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    PgClient.layer({
      url: config.databaseUrl,
      maxConnections: 20,
      idleTimeout: "60 seconds",
      connectTimeout: "5 seconds",
      applicationName: "account-api"
    }))
)

/** The cheapest statement the server must answer: readiness asks it (D9). */
export const ping = (sql: SqlClient.SqlClient) => sql`SELECT 1`

/** A fixed key for the advisory lock under which the migrations table is first created. */
const MIGRATION_LOCK_KEY = 727_001

/**
 * Runs pending migrations and returns their names. The migrator serialises
 * runs with `LOCK TABLE` on its table, but creates that table unguarded; two
 * processes starting at once on a fresh database would race there, so the
 * table (in the migrator's own shape) is created first under an advisory lock.
 */
export const migrate = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
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

/** Migrates as the layer builds, so nothing serves before the schema is current. */
export const MigrationsLive = Layer.effectDiscard(migrate)

/** The SQL client, handed out only once the schema is current. */
export const DatabaseLive = MigrationsLive.pipe(Layer.provideMerge(SqlLive))
