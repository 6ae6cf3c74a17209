import { Clock, Effect, Runtime } from "effect"
import { AppConfig } from "../Config.js"
import { connectRedis } from "../Redis.js"

/**
 * Whether this process has told its log that Redis is away. Every BullMQ
 * connection (and the errors BullMQ relays from the copies it makes of them)
 * reports here, so an outage is one line when it starts and one when it ends,
 * however many connections retry how often (D9).
 */
let redisAway = false
/** When the last outage ended: the other connections reconnect a moment later, and their errors belong to it. */
let redisBackAt = 0
const OUTAGE_TAIL_MS = 5_000

const isConnectionError = (error: unknown) =>
  error instanceof Error &&
  /ECONN|EPIPE|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|EAI_AGAIN|closed|socket|connect|writeable|reset/i.test(
    `${"code" in error ? String(error.code) : ""} ${error.message}`
  )

/**
 * Reports an error of the queue's Redis: a connection error once per outage;
 * while Redis is away, nothing more; anything else as a warning of its own.
 */
export const reportQueueError = (error: unknown) =>
  Effect.gen(function*() {
    if (redisAway) return
    if (!isConnectionError(error)) return yield* Effect.logWarning("queue error", error)
    if ((yield* Clock.currentTimeMillis) - redisBackAt < OUTAGE_TAIL_MS) return
    redisAway = true
    yield* Effect.logError("the queue's Redis is unreachable; retrying", error)
  })

const reportQueueReady = Effect.gen(function*() {
  if (!redisAway) return
  redisAway = false
  redisBackAt = yield* Clock.currentTimeMillis
  yield* Effect.logInfo("the queue's Redis is reachable again")
})

/**
 * A Redis connection for BullMQ (a cluster's with `REDIS_CLUSTER_NODES`), closed with the scope. BullMQ needs
 * `maxRetriesPerRequest: null` (its blocking commands wait indefinitely) and
 * duplicates this connection for them.
 */
export const bullConnection = Effect.gen(function*() {
  const config = yield* AppConfig
  const runFork = Runtime.runFork(yield* Effect.runtime<never>())
  const connection = yield* Effect.acquireRelease(
    Effect.sync(() => connectRedis(config, { maxRetriesPerRequest: null })),
    (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
  )
  // Without a listener, Node treats an error event as a crash.
  connection.on("error", (error) => runFork(reportQueueError(error)))
  connection.on("ready", () => runFork(reportQueueReady))
  return {
    connection,
    prefix: config.settlementQueuePrefix,
    report: (error: unknown) => runFork(reportQueueError(error))
  } as const
})
