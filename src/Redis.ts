import { Effect, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { AppConfig } from "./Config.js"

/**
 * The Redis connection for request-path work (rate-limit counters, readiness).
 * Commands fail fast instead of queueing while Redis is away, so callers can
 * answer 503 rather than hang. The queue opens its own connections (BullMQ
 * needs blocking ones).
 */
export class Redis extends Effect.Service<Redis>()("Redis", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new IORedis(Redacted.value(config.redisUrl), {
          lazyConnect: false,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: 1_000,
          connectTimeout: 2_000
        })
      ),
      (client) => Effect.promise(() => client.quit().catch(() => "OK"))
    )
    // ioredis reports connection trouble as events; without a listener Node treats them as crashes.
    client.on("error", () => {})
    return {
      client,
      /** Every key this service owns starts with the configured prefix. */
      key: (...parts: ReadonlyArray<string>) => [config.redisPrefix, ...parts].join(":")
    } as const
  })
}) {}
