import { Config, ConfigError, Duration, Effect, Either, LogLevel, Redacted } from "effect"
import { userInfo } from "node:os"

/**
 * A log level by the names the README lists (`debug`, `info`, `warning`, `error`)
 * or by Effect's own labels (`warn`, `all`, `none`, …), in any case.
 */
const logLevelSetting = Config.string().pipe(
  Config.mapOrFail((value) => {
    const label = value.toUpperCase() === "WARNING" ? "WARN" : value.toUpperCase()
    const level = LogLevel.allLevels.find((candidate) => candidate.label === label)
    return level === undefined
      ? Either.left(ConfigError.InvalidData([], `Expected a log level but received "${value}"`))
      : Either.right(level)
  })
)

/** libpq's rule, which `pg` lacks: a URL without a user name connects as `PGUSER` or the operating-system user. */
const withDefaultUser = (databaseUrl: Redacted.Redacted, user: string): Redacted.Redacted => {
  const url = new URL(Redacted.value(databaseUrl))
  if (url.username !== "") return databaseUrl
  url.username = user
  return Redacted.make(url.toString())
}

/** A positive number of milliseconds; unset is none. */
const positiveMillis = (name: string) =>
  Config.option(
    Config.integer(name).pipe(Config.validate({ message: "must be a positive integer", validation: (ms) => ms > 0 }))
  )

/**
 * Every setting the service reads, read once. Secrets stay `Redacted` until the
 * driver that needs them unwraps them.
 */
export class AppConfig extends Effect.Service<AppConfig>()("AppConfig", {
  effect: Effect.gen(function*() {
    const nodeEnv = yield* Config.string("NODE_ENV").pipe(Config.withDefault("development"))
    return {
      nodeEnv,
      isProduction: nodeEnv === "production",
      databaseUrl: withDefaultUser(
        yield* Config.redacted("DATABASE_URL").pipe(
          Config.withDefault(Redacted.make("postgres://localhost:5432/account_api"))
        ),
        yield* Config.string("PGUSER").pipe(Config.withDefault(userInfo().username))
      ),
      redisUrl: yield* Config.redacted("REDIS_URL").pipe(Config.withDefault(Redacted.make("redis://127.0.0.1:6379"))),
      /** Namespaces the service's own Redis keys (sign-in counters, metrics), so tests and tenants never collide. */
      redisPrefix: yield* Config.string("REDIS_PREFIX").pipe(Config.withDefault("account-api")),
      /**
       * The settlement queue's BullMQ prefix (D8): BullMQ's own default, so a runner that writes
       * `new Queue("settlement", { connection })` in any language reaches the worker.
       */
      settlementQueuePrefix: yield* Config.string("SETTLEMENT_QUEUE_PREFIX").pipe(Config.withDefault("bull")),
      port: yield* Config.port("PORT").pipe(Config.withDefault(8080)),
      /** Browser origins allowed to call the API (D15); none sends no CORS headers. */
      corsOrigins: yield* Config.string("CORS_ORIGINS").pipe(
        Config.withDefault(""),
        Config.map((list) => list.split(",").map((origin) => origin.trim()).filter((origin) => origin !== ""))
      ),
      authSecret: yield* Config.option(Config.redacted("AUTH_SECRET")),
      tokenTtl: Duration.seconds(yield* Config.integer("TOKEN_TTL_SECONDS").pipe(Config.withDefault(86_400))),
      reservationTtl: Duration.seconds(
        yield* Config.integer("RESERVATION_TTL_SECONDS").pipe(Config.withDefault(86_400))
      ),
      logLevel: yield* Config.nested(logLevelSetting, "LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info)),
      /** The settlement worker (D8): jobs at once, and how a dead worker's jobs are taken up again. */
      settlement: {
        concurrency: yield* Config.integer("SETTLEMENT_CONCURRENCY").pipe(Config.withDefault(256)),
        /** Unset leaves BullMQ's defaults (30 s each). */
        lockDurationMs: yield* positiveMillis("SETTLEMENT_LOCK_DURATION_MS"),
        stalledIntervalMs: yield* positiveMillis("SETTLEMENT_STALLED_INTERVAL_MS"),
        /**
         * How often a job may be taken up again after its worker died before BullMQ fails it for
         * good. BullMQ's default is 1: two crashes in a row would drop money never booked. A job
         * applies once by its key in the database, so running it again is safe.
         */
        maxStalledCount: yield* Config.integer("SETTLEMENT_MAX_STALLED_COUNT").pipe(
          Config.validate({ message: "must be a positive integer", validation: (count) => count > 0 }),
          Config.withDefault(10)
        ),
        /**
         * The typed producer adds a job again, under the same id and key, when its result has not
         * arrived within this: a no-op while BullMQ still has it, its recovery if Redis lost it (D14).
         */
        recoverAfter: Duration.millis(
          yield* Config.integer("SETTLEMENT_RECOVER_AFTER_MS").pipe(
            Config.validate({ message: "must be a positive integer", validation: (ms) => ms > 0 }),
            Config.withDefault(60_000)
          )
        )
      },
      /** Where development keeps its generated secret and private database servers. */
      dataDir: yield* Config.string("DATA_DIR").pipe(Config.withDefault(".data"))
    } as const
  })
}) {}
