import { Effect, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { AppConfig } from "./Config.js"

/**
 * BullMQ needs Redis never to evict: an evicted key is a settlement job lost,
 * money never booked (D14). Said once at start, naming the policy found; the
 * service runs on (`/readyz` stays 200), since the operator may not control it.
 */
const checkEvictionPolicy = (client: IORedis) =>
  Effect.tryPromise(() => client.config("GET", "maxmemory-policy")).pipe(
    Effect.timeout("2 seconds"),
    Effect.flatMap((reply) => {
      const policy = Array.isArray(reply) ? String(reply[1] ?? "") : ""
      return policy === "noeviction" ? Effect.void : Effect.logWarning(
        `Redis's maxmemory-policy is ${
          policy === "" ? "unknown" : policy
        }, not noeviction: under memory pressure Redis may drop queued settlement jobs`
      ).pipe(Effect.annotateLogs("maxmemory_policy", policy))
    }),
    // A managed Redis may refuse CONFIG; one that is away is reported by readiness.
    Effect.catchAll(() => Effect.logInfo("could not read Redis's maxmemory-policy; it must be noeviction (D14)"))
  )

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
    yield* checkEvictionPolicy(client)
    return {
      client,
      /** Every key this service owns starts with the configured prefix. */
      key: (...parts: ReadonlyArray<string>) => [config.redisPrefix, ...parts].join(":")
    } as const
  })
}) {}
