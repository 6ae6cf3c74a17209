import { SqlClient } from "@effect/sql"
import { Deferred, Duration, Effect, Exit, Option, Redacted, Schedule } from "effect"
import pg from "pg"
import { AppConfig } from "../Config.js"
import { quietSince, serverNow } from "../Sql.js"

/** What a listener hears: its channel's payloads, and whether it can hear them at all. */
export interface ListenerHandlers {
  /** LISTEN is in place: from now on every commit's notification arrives. */
  readonly onListening: () => void
  /** The connection is gone or silent: notifications may be missed until `onListening` again. */
  readonly onLost: () => void
  readonly onMessage: (payload: string) => void
  /**
   * A heartbeat went out: until it is answered, the connection may be silent
   * and changes committed from now on may go unheard.
   */
  readonly onHeartbeatSent: () => void
  /**
   * The last heartbeat came back: every change committed before it went out
   * has been heard (PostgreSQL delivers a connection's notifications before
   * the answer to its next query).
   */
  readonly onHeartbeatAnswered: () => void
}

/** How often the connection must prove it is alive, and how long it may take to answer. */
const HEARTBEAT_EVERY = Duration.seconds(1)
const HEARTBEAT_WITHIN = Duration.seconds(2)
const RECONNECT_AFTER = Duration.seconds(1)

/** How a listening connection names itself to PostgreSQL, so that others can find it (`heardEverywhere`). */
const applicationNameOf = (channel: string) => `account-api:${channel}`

/**
 * Listens on a PostgreSQL channel over a connection of its own, for as long as
 * the scope lasts, reconnecting after a loss. Unlike `PgClient.listen`, it says
 * when it is deaf: a dropped connection, or one that stops answering its
 * heartbeat, calls `onLost`, so the caller stops trusting what it keeps. Each
 * heartbeat is announced as it goes out and as it comes back, so a caller can
 * stop trusting at once rather than after `HEARTBEAT_WITHIN` (D2).
 * Handlers run synchronously as each event arrives.
 */
export const listen = (channel: string, handlers: ListenerHandlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig

    const connect = Effect.acquireRelease(
      Effect.tryPromise(async () => {
        const client = new pg.Client({
          connectionString: Redacted.value(config.databaseDirectUrl),
          application_name: applicationNameOf(channel),
          connectionTimeoutMillis: Duration.toMillis(HEARTBEAT_WITHIN),
          keepAlive: true
        })
        // Until the listener watches for errors, one must not crash the process.
        client.on("error", () => {})
        await client.connect()
        return client
      }),
      // Interruptible, so that the timeout ends the wait (a release runs uninterruptibly).
      (client) =>
        Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )

    const session = Effect.gen(function*() {
      const client = yield* connect
      const gone = yield* Deferred.make<void>()
      // Lost the moment the connection says so, not once its release is done: until then a
      // request could still be answered from memory that no one keeps current.
      const lost = () => {
        handlers.onLost()
        Deferred.unsafeDone(gone, Exit.void)
      }
      client.on("error", lost)
      client.on("end", lost)
      client.on("notification", (message) => {
        if (message.channel === channel && message.payload !== undefined) handlers.onMessage(message.payload)
      })
      yield* Effect.tryPromise(() => client.query(`LISTEN ${pg.escapeIdentifier(channel)}`))
      handlers.onListening()
      const heartbeat = Effect.sync(handlers.onHeartbeatSent).pipe(
        Effect.zipRight(Effect.tryPromise(() => client.query("SELECT 1"))),
        Effect.tap(() => Effect.sync(handlers.onHeartbeatAnswered)),
        Effect.timeoutFail({ duration: HEARTBEAT_WITHIN, onTimeout: () => "heartbeat unanswered" }),
        Effect.repeat(Schedule.spaced(HEARTBEAT_EVERY))
      )
      const closed = Effect.zipRight(Deferred.await(gone), Effect.fail("connection closed"))
      return yield* Effect.raceFirst(closed, heartbeat)
    }).pipe(
      Effect.scoped,
      Effect.ensuring(Effect.sync(handlers.onLost)),
      Effect.catchAllCause((cause) => Effect.logWarning(`listening on ${channel} stopped; reconnecting`, cause)),
      Effect.zipRight(Effect.sleep(RECONNECT_AFTER))
    )

    yield* refusePooler(Redacted.value(config.databaseDirectUrl), channel)
    return yield* Effect.forkScoped(Effect.forever(session))
  })

/** How often `heardEverywhere` looks again; a heartbeat comes about once a second. */
const HEARD_POLL = Duration.millis(25)

/**
 * Returns once every process listening on `channel` (on this database) has heard what was
 * committed before it was called, so that none of them can act on what it kept from before.
 * A listener trusts its memory only while no heartbeat is out, and PostgreSQL sends a
 * connection every notification committed before a statement reached it ahead of that
 * statement's answer: so once each listening connection has begun a statement (a heartbeat,
 * or LISTEN after a reconnection) since this was called, each process has either heard or is
 * not trusting its memory until it has. That takes up to a heartbeat's interval. A listener
 * that begins none within its interval and timeout has stopped trusting (its heartbeat is out
 * or timed out) or is gone, and is not waited for longer. Changes still apply when PostgreSQL
 * cannot be asked: only the wait is given up, with a warning.
 */
export const heardEverywhere = (channel: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const since = yield* serverNow(sql)
    const left = yield* quietSince(sql, applicationNameOf(channel), since).pipe(
      Effect.repeat({ until: (count) => count === 0, schedule: Schedule.spaced(HEARD_POLL) }),
      Effect.timeoutOption(Duration.sum(HEARTBEAT_EVERY, HEARTBEAT_WITHIN))
    )
    if (Option.isNone(left)) {
      yield* Effect.logWarning(`a process listening on ${channel} began no heartbeat in time; not waiting for it`)
    }
  }).pipe(
    Effect.catchTag("SqlError", (error) =>
      Effect.logWarning(`could not learn whether every process heard on ${channel}`, error))
  )

/**
 * Whether statements of one connection to `url` may run in different server sessions: a pooler
 * in transaction mode (PgBouncer) in front of PostgreSQL. Asked with two connections: the first
 * learns its server process, the second opens a transaction, which holds a server session, and
 * the first asks again. On PostgreSQL itself the second never gets the first's process and the
 * first keeps its own; behind such a pooler the second is handed the session the first just
 * released, or the first is moved to another. `undefined` when the database cannot be asked.
 */
const behindPooler = (url: string) =>
  Effect.promise(async () => {
    const [first, second] = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })]
    first.on("error", () => {})
    second.on("error", () => {})
    const pid = async (client: pg.Client) =>
      (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid
    try {
      await first.connect()
      await second.connect()
      const before = await pid(first)
      await second.query("BEGIN")
      const held = await pid(second)
      const after = await pid(first)
      await second.query("ROLLBACK")
      return held === before || after !== before
    } catch {
      return undefined
    } finally {
      await Promise.all([first.end().catch(() => undefined), second.end().catch(() => undefined)])
    }
  })

/**
 * LISTEN holds for the session that ran it; behind a pooler in transaction mode that session is
 * soon another client's, and notifications (here, ended sign-ins) go unheard while the
 * process believes it hears them. So a listener refuses to start there, saying what to set (D18).
 */
const refusePooler = (url: string, channel: string) =>
  Effect.flatMap(behindPooler(url), (pooled) =>
    pooled === true
      ? Effect.dieMessage(
        `LISTEN on ${channel} needs a connection to PostgreSQL itself, and the database URL goes through a ` +
          "pooler in transaction mode (statements of one connection run in different server sessions): " +
          "set DATABASE_DIRECT_URL to PostgreSQL itself, keeping DATABASE_URL on the pooler"
      )
      : Effect.void)
