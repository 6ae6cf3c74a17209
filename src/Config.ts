import { Config, ConfigError, Duration, Effect, Either, LogLevel, Redacted } from "effect"

/**
 * `LOG_LEVEL` as the README names the levels (`debug`, `info`, `warning`,
 * `error`), in any case; Effect's own labels (`warn`, `trace`, ...) work too.
 */
const LogLevelConfig = Config.mapOrFail(Config.string("LOG_LEVEL"), (value) => {
  const label = value.toUpperCase() === "WARNING" ? "WARN" : value.toUpperCase()
  const level = LogLevel.allLevels.find((level) => level.label === label)
  return level === undefined
    ? Either.left(ConfigError.InvalidData([], `Expected debug, info, warning or error but received "${value}"`))
    : Either.right(level)
})

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
      databaseUrl: yield* Config.redacted("DATABASE_URL").pipe(
        Config.withDefault(Redacted.make("postgres://localhost:5432/account_api"))
      ),
      redisUrl: yield* Config.redacted("REDIS_URL").pipe(Config.withDefault(Redacted.make("redis://127.0.0.1:6379"))),
      /** Namespaces every Redis key (queue and counters), so tests and tenants never collide. */
      redisPrefix: yield* Config.string("REDIS_PREFIX").pipe(Config.withDefault("account-api")),
      port: yield* Config.port("PORT").pipe(Config.withDefault(8080)),
      authSecret: yield* Config.option(Config.redacted("AUTH_SECRET")),
      tokenTtl: Duration.seconds(yield* Config.integer("TOKEN_TTL_SECONDS").pipe(Config.withDefault(86_400))),
      reservationTtl: Duration.seconds(
        yield* Config.integer("RESERVATION_TTL_SECONDS").pipe(Config.withDefault(86_400))
      ),
      logLevel: yield* LogLevelConfig.pipe(Config.withDefault(LogLevel.Info)),
      /** Where development keeps its generated secret and private database servers. */
      dataDir: yield* Config.string("DATA_DIR").pipe(Config.withDefault(".data"))
    } as const
  })
}) {}

