import { Deferred, Duration, Effect, Exit, Redacted, Schedule } from "effect"
import pg from "pg"
import { AppConfig } from "../Config.js"

/** What a listener hears: its channel's payloads, and whether it can hear them at all. */
export interface ListenerHandlers {
  /** LISTEN is in place: from now on every commit's notification arrives. */
  readonly onListening: () => void
  /** The connection is gone or silent: notifications may be missed until `onListening` again. */
  readonly onLost: () => void
  readonly onMessage: (payload: string) => void
}

/** How often the connection must prove it is alive, and how long it may take to answer. */
const HEARTBEAT_EVERY = Duration.seconds(1)
const HEARTBEAT_WITHIN = Duration.seconds(2)
const RECONNECT_AFTER = Duration.seconds(1)

/**
 * Listens on a PostgreSQL channel over a connection of its own, for as long as
 * the scope lasts, reconnecting after a loss. Unlike `PgClient.listen`, it says
 * when it is deaf: a dropped connection, or one that stops answering its
 * heartbeat, calls `onLost`, so the caller stops trusting what it keeps.
 * Handlers run synchronously as each event arrives.
 */
export const listen = (channel: string, handlers: ListenerHandlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig

    const connect = Effect.acquireRelease(
      Effect.tryPromise(async () => {
        const client = new pg.Client({
          connectionString: Redacted.value(config.databaseUrl),
          application_name: `account-api:${channel}`,
          connectionTimeoutMillis: Duration.toMillis(HEARTBEAT_WITHIN),
          keepAlive: true
        })
        // Until the listener watches for errors, one must not crash the process.
        client.on("error", () => {})
        await client.connect()
        return client
      }),
      (client) => Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption(1000))
    )

    const session = Effect.gen(function*() {
      const client = yield* connect
      const gone = yield* Deferred.make<void>()
      client.on("error", () => Deferred.unsafeDone(gone, Exit.void))
      client.on("end", () => Deferred.unsafeDone(gone, Exit.void))
      client.on("notification", (message) => {
        if (message.channel === channel && message.payload !== undefined) handlers.onMessage(message.payload)
      })
      yield* Effect.tryPromise(() => client.query(`LISTEN ${pg.escapeIdentifier(channel)}`))
      handlers.onListening()
      const heartbeat = Effect.tryPromise(() => client.query("SELECT 1")).pipe(
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

    return yield* Effect.forkScoped(Effect.forever(session))
  })
