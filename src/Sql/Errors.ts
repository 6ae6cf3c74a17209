import type { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"

/**
 * What PostgreSQL said about a failed statement, for the repositories and
 * services that turn SQL failures into their own: one reading of SQLSTATEs.
 */

export const isSqlError = (u: unknown): u is SqlError => u instanceof SqlError

/** The SQLSTATE (or the driver's socket error code) behind a failure; "" when there is none. */
export const sqlState = (error: SqlError): string => {
  const cause: unknown = error.cause
  return typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : ""
}

/**
 * The database is away: connection lost or refused, server shutting down or starting (08xxx,
 * 57P0x). Nothing a statement did. The driver reports a connection it lost with no SQLSTATE
 * ("Connection terminated unexpectedly", "Client has encountered a connection error and is not
 * queryable"), so the cause's message is read too.
 */
export const isDatabaseAway = (error: SqlError): boolean => {
  const code = sqlState(error)
  const cause: unknown = error.cause
  const causeMessage = cause instanceof Error ? cause.message : ""
  return code.startsWith("08") || code.startsWith("57P") || code === "ECONNREFUSED" || code === "ECONNRESET" ||
    code === "ETIMEDOUT" || /connect|timeout|terminat/i.test(`${error.message} ${causeMessage}`)
}

/**
 * A statement cancelled (57014): never asked for by a request of this service (interrupted
 * statements run to their end, `src/Sql.ts`), so a cancel from outside or a statement timeout,
 * which a retry can outlive.
 */
export const isCancelled = (error: SqlError): boolean => sqlState(error) === "57014"

/** A row lock not granted within the lock timeout (55P03). */
export const isLockTimeout = (error: SqlError): boolean => sqlState(error) === "55P03"

/** A unique constraint refused a row (23505). */
export const isUniqueViolation = (error: SqlError): boolean => sqlState(error) === "23505"

/**
 * A repository's edge: a failure the repository gives no meaning to (a lost connection, a row
 * that does not decode) becomes a defect, so services see only the domain's errors. The HTTP
 * layer answers a defect from a database that is away with 503 (D6).
 */
export const orDefect =
  <Args extends ReadonlyArray<unknown>, A, E, R>(query: (...args: Args) => Effect.Effect<A, E, R>) =>
  (...args: Args): Effect.Effect<A, never, R> => Effect.orDie(query(...args))

/**
 * A transaction around `effect` (a savepoint inside another). A failure of the transaction itself
 * (BEGIN, COMMIT, the connection lost) is a defect, as the repositories' failures are; the
 * effect's own errors pass through, and roll it back.
 */
export const inTransaction = (sql: SqlClient) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  sql.withTransaction(effect).pipe(Effect.catchIf(isSqlError, Effect.die)) as Effect.Effect<A, E, R>
