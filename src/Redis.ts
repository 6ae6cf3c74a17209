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
    // Commands fail fast while disconnected, so wait (briefly) for the first connection before serving.
    // Redis being down is not fatal: sign-in answers 503 and /readyz says so until it is back.
    yield* Effect.async<void>((resume) => {
      if (client.status === "ready") return resume(Effect.void)
      client.once("ready", () => resume(Effect.void))
    }).pipe(
      Effect.timeout("3 seconds"),
      Effect.catchAll(() => Effect.logWarning("Redis is not answering yet; continuing without it"))
    )
    return {
      client,
      /** Every key this service owns starts with the configured prefix. */
      key: (...parts: ReadonlyArray<string>) => [config.redisPrefix, ...parts].join(":")
    } as const
  })
}) {}
