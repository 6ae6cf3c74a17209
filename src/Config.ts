import { Config, ConfigError, Duration, Effect, Either, LogLevel, Option, Redacted } from "effect"
import { readFileSync } from "node:fs"
import { isIP } from "node:net"
import { userInfo } from "node:os"
import { IN_FLIGHT_PER_ACCOUNT, IN_FLIGHT_PER_ENDPOINT, REDELIVERIES_PER_MINUTE } from "./Domain/Webhooks.js"

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

/**
 * A secret from its variable or from the file its `<NAME>_FILE` variable names (compose mounts
 * secrets as files under `/run/secrets/`, D14); both set is a mistake. One newline at the end of
 * the file is not part of the secret.
 */
const secretSetting = (name: string) =>
  Effect.gen(function*() {
    const direct = yield* Config.option(Config.redacted(name))
    const file = yield* Config.option(Config.string(`${name}_FILE`))
    if (Option.isNone(file)) return direct
    if (Option.isSome(direct)) {
      return yield* Effect.fail(ConfigError.InvalidData([name], `Set ${name} or ${name}_FILE, not both`))
    }
    const text = yield* Effect.try({
      try: () => readFileSync(file.value, "utf8"),
      catch: (error) =>
        ConfigError.InvalidData(
          [`${name}_FILE`],
          `Cannot read ${file.value}: ${error instanceof Error ? error.message : String(error)}`
        )
    })
    const value = text.replace(/\r?\n$/, "")
    if (value === "") return yield* Effect.fail(ConfigError.InvalidData([`${name}_FILE`], `${file.value} is empty`))
    return Option.some(Redacted.make(value))
  })

/** A URL with the password given apart from it (`DATABASE_PASSWORD`, `REDIS_PASSWORD`, or their files). */
const withPassword = (name: string, url: Redacted.Redacted, password: Option.Option<Redacted.Redacted>) => {
  if (Option.isNone(password)) return Effect.succeed(url)
  const parsed = new URL(Redacted.value(url))
  if (parsed.password !== "") {
    return Effect.fail(ConfigError.InvalidData([name], `The URL already holds a password; give it once`))
  }
  parsed.password = Redacted.value(password.value)
  return Effect.succeed(Redacted.make(parsed.toString()))
}

/** An address or a CIDR (`10.0.0.0/8`, `2001:db8::/32`), as `TRUSTED_PROXIES` lists them. */
const isAddressOrCidr = (entry: string) => {
  const [address = "", prefix, ...rest] = entry.split("/")
  const family = isIP(address.replace(/^::ffff:(?=\d+\.)/i, ""))
  if (family === 0 || rest.length > 0) return false
  if (prefix === undefined) return true
  const bits = Number(prefix)
  return /^\d+$/.test(prefix) && bits <= (family === 4 ? 32 : 128)
}

/** A positive integer (a count, or milliseconds); `fallback` when unset. */
const positiveInteger = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

/**
 * Every setting the service reads, read once. Secrets stay `Redacted` until the
 * driver that needs them unwraps them.
 */
export class AppConfig extends Effect.Service<AppConfig>()("AppConfig", {
  effect: Effect.gen(function*() {
    const nodeEnv = yield* Config.string("NODE_ENV").pipe(Config.withDefault("development"))
    const pgUser = yield* Config.string("PGUSER").pipe(Config.withDefault(userInfo().username))
    const databasePassword = yield* secretSetting("DATABASE_PASSWORD")
    const databaseUrlOf = (name: string, url: Redacted.Redacted) =>
      Effect.map(withPassword(name, url, databasePassword), (withIt) => withDefaultUser(withIt, pgUser))
    const databaseUrl = yield* databaseUrlOf(
      "DATABASE_URL",
      yield* Config.redacted("DATABASE_URL").pipe(
        Config.withDefault(Redacted.make("postgres://localhost:5432/account_api"))
      )
    )
    const directUrl = yield* Config.option(Config.redacted("DATABASE_DIRECT_URL"))
    const settings = {
      nodeEnv,
      isProduction: nodeEnv === "production",
      databaseUrl,
      /**
       * `DATABASE_URL` may name a pooler in transaction mode (PgBouncer); `DATABASE_DIRECT_URL`,
       * PostgreSQL itself, serves only what a pooled connection cannot do: LISTEN for sign-in
       * changes (D2) and the migrations (D18). Unset, it is `DATABASE_URL`.
       */
      databaseDirectUrl: Option.isSome(directUrl)
        ? yield* databaseUrlOf("DATABASE_DIRECT_URL", directUrl.value)
        : databaseUrl,
      /**
       * Connections each process keeps to `DATABASE_URL` at most. Every API and worker process
       * holds its own pool, so their sum must fit PostgreSQL's `max_connections` (100 unless set)
       * or the pooler's, beside the LISTEN connections (D14, D18).
       */
      databasePoolSize: yield* positiveInteger("DATABASE_POOL_SIZE", 20),
      redisUrl: yield* withPassword(
        "REDIS_PASSWORD",
        yield* Config.redacted("REDIS_URL").pipe(Config.withDefault(Redacted.make("redis://127.0.0.1:6379"))),
        yield* secretSetting("REDIS_PASSWORD")
      ),
      /**
       * Redis Cluster's seed nodes (`host:port,host:port`); set, the queue and the service's keys use
       * cluster mode (D18), and `REDIS_URL` gives only the credentials.
       */
      redisClusterNodes: yield* Config.string("REDIS_CLUSTER_NODES").pipe(
        Config.withDefault(""),
        Config.mapOrFail((list) => {
          const nodes = list.split(",").map((node) => node.trim()).filter((node) => node !== "").map((node) => {
            const match = node.match(/^(.+):(\d{1,5})$/)
            return match?.[1] === undefined ? undefined : { host: match[1], port: Number(match[2]) }
          })
          return nodes.every((node) => node !== undefined)
            ? Either.right(nodes.filter((node) => node !== undefined))
            : Either.left(ConfigError.InvalidData(["REDIS_CLUSTER_NODES"], "must be host:port, comma-separated"))
        })
      ),
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
      /** An export whose reader takes nothing for this long is cut off (issue 22), its slot freed. */
      exportStall: Duration.seconds(
        yield* Config.integer("EXPORT_STALL_SECONDS").pipe(
          Config.validate({ message: "must be a positive integer", validation: (seconds) => seconds > 0 }),
          Config.withDefault(30)
        )
      ),
      /** A live event stream with nothing to send for this long sends a comment line (D17: 15 s); shorter in tests. */
      eventsHeartbeat: Duration.millis(yield* positiveInteger("EVENTS_HEARTBEAT_MS", 15_000)),
      /**
       * Live event streams open at once on one API process: per user, and per account whatever its
       * members (D17). Past either, 429 rate_limited naming the bound.
       */
      eventStreams: {
        perUser: yield* positiveInteger("EVENT_STREAMS_PER_USER", 5),
        perAccount: yield* positiveInteger("EVENT_STREAMS_PER_ACCOUNT", 20)
      },
      /**
       * Proxies whose `X-Forwarded-For` is believed (issue 22.4): addresses or CIDRs,
       * comma-separated; none by default, so the peer's address is the client's.
       */
      trustedProxies: yield* Config.string("TRUSTED_PROXIES").pipe(
        Config.withDefault(""),
        Config.map((list) => list.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")),
        Config.validate({
          message: "must list IP addresses or CIDRs, comma-separated",
          validation: (entries) => entries.every(isAddressOrCidr)
        })
      ),
      /** Sign-ins, successful or not, per sliding 15 minutes (issue 22.3): per email, and per client address. */
      signInsPerEmail: yield* positiveInteger("SIGN_INS_PER_EMAIL", 30),
      signInsPerAddress: yield* positiveInteger("SIGN_INS_PER_ADDRESS", 300),
      /**
       * Each signed-in user's budget of authenticated requests, reads and writes alike (D15): a
       * bucket of `burst` requests that refills at `perSecond`, kept in Redis for the fleet.
       */
      requestBudget: {
        perSecond: yield* positiveInteger("USER_REQUESTS_PER_SECOND", 10),
        burst: yield* positiveInteger("USER_REQUEST_BURST", 50)
      },
      authSecret: yield* secretSetting("AUTH_SECRET"),
      tokenTtl: Duration.seconds(yield* Config.integer("TOKEN_TTL_SECONDS").pipe(Config.withDefault(86_400))),
      reservationTtl: Duration.seconds(
        yield* Config.integer("RESERVATION_TTL_SECONDS").pipe(Config.withDefault(86_400))
      ),
      logLevel: yield* Config.nested(logLevelSetting, "LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info)),
      /** The settlement worker (D8): jobs at once, and how a dead worker's jobs are taken up again. */
      settlement: {
        concurrency: yield* Config.integer("SETTLEMENT_CONCURRENCY").pipe(Config.withDefault(256)),
        /**
         * A job's lock, renewed by its worker every half of it: a dead worker's jobs are free once it
         * lapses. BullMQ's 30 s (with its 30 s check) left a killed worker's jobs waiting up to a
         * minute. 6 s lets a live worker's event loop run 3 s late before its jobs' locks lapse; at
         * full load on two cores it ran at most about half a second late (README, Shutdown).
         */
        lockDurationMs: yield* positiveInteger("SETTLEMENT_LOCK_DURATION_MS", 6_000),
        /** How often a worker looks for jobs whose lock lapsed; a job is taken up again at most two checks after. */
        stalledIntervalMs: yield* positiveInteger("SETTLEMENT_STALLED_INTERVAL_MS", 2_000),
        /** How often the hold-expiry sweep runs (D8); shorter in tests that compress a day of sweeps. */
        sweepEveryMs: yield* positiveInteger("RESERVATION_SWEEP_EVERY_MS", 60_000),
        /**
         * How often the grant sweep runs (D21): a grant's expiry is written within 60 s of its
         * `expires_at` whether or not anything runs, so a run every 15 s leaves room for a late one.
         */
        grantSweepEveryMs: yield* positiveInteger("GRANT_SWEEP_EVERY_MS", 15_000),
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
         * Where the settlement worker serves its own process metrics (`GET /metrics`) for Prometheus
         * to scrape; unset serves nothing. Its settlement counters are the fleet's, on the API's `/metrics`.
         */
        metricsPort: yield* Config.option(Config.port("WORKER_METRICS_PORT")),
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
      /** The books (D13, D19). */
      books: {
        /**
         * How often a worker checks every wallet row and running spend total against the entries
         * (`account_api_books_drift`, D19): one check per interval for the whole fleet. 0 turns the
         * check off, and with it the worker's drift gauges.
         */
        driftCheckEvery: yield* Config.integer("BOOKS_DRIFT_CHECK_SECONDS").pipe(
          Config.validate({ message: "must be a whole number of seconds, 0 or more", validation: (s) => s >= 0 }),
          Config.withDefault(3_600),
          Config.map((seconds) => seconds === 0 ? Option.none() : Option.some(Duration.seconds(seconds)))
        )
      },
      /** Webhook endpoints and their delivery (D17). */
      webhooks: {
        /** `http` URLs and loopback, private and link-local addresses allowed: development and tests only. */
        allowInsecure: yield* Config.boolean("WEBHOOK_ALLOW_INSECURE").pipe(Config.withDefault(false)),
        /**
         * Multiplies the retry schedule (5 s to 10 h), `Retry-After` and the five days of failures that
         * disable an endpoint: 1 in production; tests compress days into seconds with a small one.
         */
        retryScale: yield* Config.number("WEBHOOK_RETRY_SCALE").pipe(
          Config.validate({ message: "must be a positive number", validation: (scale) => scale > 0 }),
          Config.withDefault(1)
        ),
        /** Deliveries a webhooks process sends at once. */
        concurrency: yield* positiveInteger("WEBHOOK_CONCURRENCY", 50),
        /**
         * Deliveries in flight at once across every webhooks process, per account and per endpoint: a
         * job beyond either waits in the queue, not in one of a process's slots (D17).
         */
        inFlightPerAccount: yield* positiveInteger("WEBHOOK_IN_FLIGHT_PER_ACCOUNT", IN_FLIGHT_PER_ACCOUNT),
        inFlightPerEndpoint: yield* positiveInteger("WEBHOOK_IN_FLIGHT_PER_ENDPOINT", IN_FLIGHT_PER_ENDPOINT),
        /** Redeliveries an account may ask for per sliding minute (D17). */
        redeliveriesPerMinute: yield* positiveInteger("WEBHOOK_REDELIVERIES_PER_MINUTE", REDELIVERIES_PER_MINUTE),
        /** How often the relay looks at every account's log besides the notifications that wake it. */
        relaySweepMs: yield* positiveInteger("WEBHOOK_RELAY_SWEEP_MS", 10_000),
        /**
         * Where the webhooks process serves its own metrics (`GET /metrics`: its deliveries, the relay's
         * lag, its process) for Prometheus to scrape; unset serves nothing. A port of its own, apart
         * from `WORKER_METRICS_PORT`, so both processes can run on one host.
         */
        metricsPort: yield* Config.option(Config.port("WEBHOOK_WORKER_METRICS_PORT"))
      },
      /**
       * OpenTelemetry traces go over OTLP/HTTP to this base URL (`.../v1/traces`) when set; unset,
       * tracing is off and costs nothing (D18).
       */
      otlpEndpoint: yield* Config.option(
        Config.string("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(Config.map((url) => url.replace(/\/+$/, "")))
      ),
      /** Where development keeps its generated secret and private database servers. */
      dataDir: yield* Config.string("DATA_DIR").pipe(Config.withDefault(".data"))
    } as const
    // BullMQ's keys of one queue must share a slot: on Redis Cluster its prefix is a hash tag (D18).
    if (settings.redisClusterNodes.length > 0 && !/\{[^}]+\}/.test(settings.settlementQueuePrefix)) {
      return yield* Effect.fail(
        ConfigError.InvalidData(
          ["SETTLEMENT_QUEUE_PREFIX"],
          `on Redis Cluster (REDIS_CLUSTER_NODES) the queue prefix must be a hash tag, such as {bull}; it is "${settings.settlementQueuePrefix}"`
        )
      )
    }
    return settings
  })
}) {}
