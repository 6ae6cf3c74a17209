import { Effect, Redacted } from "effect"
import { Cluster, Redis as IORedis, type RedisOptions } from "ioredis"
import { createHash } from "node:crypto"
import { AppConfig } from "./Config.js"

/** One Redis server, or a Redis Cluster (`REDIS_CLUSTER_NODES`): the same commands either way. */
export type RedisClient = IORedis | Cluster

/**
 * A connection as the settings say: to `REDIS_URL`, or in cluster mode to the seed nodes of
 * `REDIS_CLUSTER_NODES` with `REDIS_URL`'s credentials, `options` for each node (D18).
 */
export const connectRedis = (config: AppConfig, options: RedisOptions & { readonly offlineQueue?: boolean }) => {
  const { offlineQueue, ...nodeOptions } = options
  if (config.redisClusterNodes.length === 0) {
    return new IORedis(Redacted.value(config.redisUrl), {
      ...nodeOptions,
      ...(offlineQueue === undefined ? {} : { enableOfflineQueue: offlineQueue })
    })
  }
  const url = new URL(Redacted.value(config.redisUrl))
  return new Cluster(config.redisClusterNodes.map((node) => ({ host: node.host, port: node.port })), {
    ...(offlineQueue === undefined ? {} : { enableOfflineQueue: offlineQueue }),
    redisOptions: {
      ...nodeOptions,
      ...(url.username === "" ? {} : { username: decodeURIComponent(url.username) }),
      ...(url.password === "" ? {} : { password: decodeURIComponent(url.password) })
    }
  })
}

/**
 * A Lua script run by its SHA1 (`EVALSHA`): its text crosses the wire only when a server does not
 * hold it yet (`NOSCRIPT`: new, restarted, flushed, or another node of a cluster), not with every
 * call as `EVAL` sends it, and Redis need not hash it each time.
 */
export const luaScript = (lua: string) => {
  const sha = createHash("sha1").update(lua).digest("hex")
  return (client: RedisClient, keys: ReadonlyArray<string>, args: ReadonlyArray<string | number>) =>
    client.evalsha(sha, keys.length, ...keys, ...args).catch((error: unknown) =>
      error instanceof Error && error.message.startsWith("NOSCRIPT")
        ? client.eval(lua, keys.length, ...keys, ...args)
        : Promise.reject(error)
    )
}

/**
 * BullMQ needs Redis never to evict: an evicted key is a settlement job lost,
 * money never booked (D14). Said once at start, naming the policy found; the
 * service runs on (`/readyz` stays 200), since the operator may not control it.
 */
const checkEvictionPolicy = (client: RedisClient) =>
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
        connectRedis(config, {
          lazyConnect: false,
          offlineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: 1_000,
          connectTimeout: 2_000
        })
      ),
      // QUIT needs Redis to answer; while it is away, drop the connection, or its reconnecting keeps a CLI run alive.
      (client) =>
        Effect.promise(() =>
          client.quit().catch(() => {
            client.disconnect()
            return "OK"
          })
        )
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
    const keyPrefix = config.redisClusterNodes.length === 0 || /\{[^}]+\}/.test(config.redisPrefix)
      ? config.redisPrefix
      : `{${config.redisPrefix}}`
    return {
      client,
      /**
       * Every key this service owns starts with the configured prefix. On Redis Cluster the prefix
       * is a hash tag (`{account-api}`, unless it has one), so all of them share a slot and a
       * script or transaction over several (the sign-in counters) stays on one node (D18).
       */
      key: (...parts: ReadonlyArray<string>) => [keyPrefix, ...parts].join(":")
    } as const
  })
}) {}
