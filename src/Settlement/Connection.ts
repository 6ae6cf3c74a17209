import { Effect, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { AppConfig } from "../Config.js"

/**
 * A Redis connection for BullMQ, closed with the scope. BullMQ needs
 * `maxRetriesPerRequest: null` (its blocking commands wait indefinitely) and
 * duplicates this connection for them.
 */
export const bullConnection = Effect.gen(function*() {
  const config = yield* AppConfig
  const connection = yield* Effect.acquireRelease(
    Effect.sync(() => new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })),
    (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
  )
  // Connection trouble is reported by the commands that meet it; an unheard error event would crash the process.
  connection.on("error", () => {})
  return { connection, prefix: config.settlementQueuePrefix } as const
})
