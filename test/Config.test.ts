import { describe, expect, it } from "@effect/vitest"
import { Cause, ConfigProvider, Duration, Effect, Exit, Layer, LogLevel, Option, Redacted } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { Tokens } from "../src/Auth/Tokens.js"
import { AppConfig } from "../src/Config.js"

const configWith = (settings: Record<string, string>) =>
  Effect.provide(
    AppConfig,
    AppConfig.Default.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson(settings))))
  )

describe("LOG_LEVEL", () => {
  it.effect("accepts the names the README lists, in any case", () =>
    Effect.gen(function*() {
      expect((yield* configWith({ LOG_LEVEL: "warning" })).logLevel).toBe(LogLevel.Warning)
      expect((yield* configWith({ LOG_LEVEL: "debug" })).logLevel).toBe(LogLevel.Debug)
      expect((yield* configWith({ LOG_LEVEL: "ERROR" })).logLevel).toBe(LogLevel.Error)
      expect((yield* configWith({ LOG_LEVEL: "warn" })).logLevel).toBe(LogLevel.Warning)
    }))

  it.effect("defaults to info", () =>
    Effect.gen(function*() {
      expect((yield* configWith({})).logLevel).toBe(LogLevel.Info)
    }))

  it.effect("refuses a level it does not know", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(configWith({ LOG_LEVEL: "loud" }))
      expect(Exit.isFailure(exit)).toBe(true)
    }))
})

describe("DATABASE_POOL_SIZE (D14)", () => {
  it.effect("is 20 unless set, and refuses what is not a positive integer, so the service does not start", () =>
    Effect.gen(function*() {
      expect((yield* configWith({})).databasePoolSize).toBe(20)
      expect((yield* configWith({ DATABASE_POOL_SIZE: "5" })).databasePoolSize).toBe(5)
      for (const value of ["0", "-3", "many", "2.5"]) {
        expect(Exit.isFailure(yield* Effect.exit(configWith({ DATABASE_POOL_SIZE: value })))).toBe(true)
      }
    }))
})

describe("BOOKS_DRIFT_CHECK_SECONDS (D19)", () => {
  it.effect("is an hour unless set, 0 turns the check off, and what is no whole number of seconds is refused", () =>
    Effect.gen(function*() {
      expect((yield* configWith({})).books.driftCheckEvery).toEqual(Option.some(Duration.hours(1)))
      expect((yield* configWith({ BOOKS_DRIFT_CHECK_SECONDS: "2" })).books.driftCheckEvery).toEqual(
        Option.some(Duration.seconds(2))
      )
      expect((yield* configWith({ BOOKS_DRIFT_CHECK_SECONDS: "0" })).books.driftCheckEvery).toEqual(Option.none())
      for (const value of ["-1", "hourly", "1.5"]) {
        expect(Exit.isFailure(yield* Effect.exit(configWith({ BOOKS_DRIFT_CHECK_SECONDS: value })))).toBe(true)
      }
    }))
})

describe("TRUSTED_PROXIES (issue 22.4)", () => {
  it.effect("takes addresses and CIDRs, IPv4 and IPv6, comma-separated; none by default", () =>
    Effect.gen(function*() {
      expect((yield* configWith({})).trustedProxies).toEqual([])
      expect((yield* configWith({ TRUSTED_PROXIES: "10.0.0.0/8, 192.0.2.7,2001:db8::/32 ,::1" })).trustedProxies)
        .toEqual(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::1"])
    }))

  it.effect("refuses an entry that is no address or CIDR, so the service does not start", () =>
    Effect.gen(function*() {
      for (const value of ["10.0.0.0/33", "proxy.internal", "10.0.0.1/8/2", "2001:db8::/129"]) {
        expect(Exit.isFailure(yield* Effect.exit(configWith({ TRUSTED_PROXIES: value })))).toBe(true)
      }
    }))
})

describe("the development secret (D2)", () => {
  /** A data folder of the test's own, removed when it ends. */
  const dataFolder = Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-secret-"))),
    (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
  )

  const tokensWith = (dataDir: string) =>
    Effect.provide(
      Tokens,
      Tokens.Default.pipe(
        Layer.provide(AppConfig.Default),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson({ DATA_DIR: dataDir, NODE_ENV: "development" })))
      )
    )

  it.scoped("is generated at least 32 bytes long and kept", () =>
    Effect.gen(function*() {
      const dataDir = yield* dataFolder
      yield* tokensWith(dataDir)
      const kept = readFileSync(path.join(dataDir, "auth-secret"), "utf8")
      expect(Buffer.byteLength(kept.trim(), "utf8")).toBeGreaterThanOrEqual(32)
      yield* tokensWith(dataDir)
      expect(readFileSync(path.join(dataDir, "auth-secret"), "utf8")).toBe(kept)
    }))

  it.scoped("a kept file shorter than 32 bytes is refused at start, not used", () =>
    Effect.gen(function*() {
      const dataDir = yield* dataFolder
      writeFileSync(path.join(dataDir, "auth-secret"), "short\n")
      const exit = yield* Effect.exit(tokensWith(dataDir))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")).toContain("shorter than 32 bytes")
    }))
})

describe("secrets from files (compose secrets, D14)", () => {
  const secretsFolder = Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-secrets-"))),
    (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
  )

  it.scoped("AUTH_SECRET_FILE, DATABASE_PASSWORD_FILE and REDIS_PASSWORD_FILE are read, less one final newline", () =>
    Effect.gen(function*() {
      const folder = yield* secretsFolder
      const file = (name: string, text: string) => {
        writeFileSync(path.join(folder, name), text)
        return path.join(folder, name)
      }
      const config = yield* configWith({
        AUTH_SECRET_FILE: file("auth_secret", "a-secret-of-at-least-thirty-two-bytes-0123456789\n"),
        DATABASE_URL: "postgres://account_api_app@db.internal:5432/account_api",
        DATABASE_PASSWORD_FILE: file("db_app_password", "p@ss/word:1\n"),
        REDIS_URL: "redis://account-api@redis.internal:6379",
        REDIS_PASSWORD_FILE: file("redis_app_password", "r3dis pass")
      })
      expect(config.authSecret.pipe(Option.map(Redacted.value))).toEqual(
        Option.some("a-secret-of-at-least-thirty-two-bytes-0123456789")
      )
      const database = new URL(Redacted.value(config.databaseUrl))
      expect([database.username, decodeURIComponent(database.password), database.host]).toEqual([
        "account_api_app",
        "p@ss/word:1",
        "db.internal:5432"
      ])
      const redis = new URL(Redacted.value(config.redisUrl))
      expect([redis.username, decodeURIComponent(redis.password)]).toEqual(["account-api", "r3dis pass"])
      // Redacted: the password never shows in what a log line would print.
      expect(String(config.databaseUrl)).not.toContain("p@ss")
    }))

  it.scoped("refuses a variable and its file both set, a missing file and an empty one", () =>
    Effect.gen(function*() {
      const folder = yield* secretsFolder
      writeFileSync(path.join(folder, "empty"), "\n")
      writeFileSync(path.join(folder, "secret"), "x".repeat(40))
      const refused = [
        { AUTH_SECRET: "y".repeat(40), AUTH_SECRET_FILE: path.join(folder, "secret") },
        { AUTH_SECRET_FILE: path.join(folder, "missing") },
        { DATABASE_PASSWORD_FILE: path.join(folder, "empty") },
        { DATABASE_URL: "postgres://u:pw@h/db", DATABASE_PASSWORD_FILE: path.join(folder, "secret") }
      ]
      for (const settings of refused) {
        const exit = yield* Effect.exit(configWith(settings))
        expect(Exit.isFailure(exit), JSON.stringify(settings)).toBe(true)
      }
      // Neither set: no secret, the development default applies.
      expect(Option.isNone((yield* configWith({})).authSecret)).toBe(true)
    }))
})

describe("USER_REQUESTS_PER_SECOND and USER_REQUEST_BURST (D15)", () => {
  it.effect("are 10 a second in bursts of 50 unless set, and refuse what is not a positive integer", () =>
    Effect.gen(function*() {
      expect((yield* configWith({})).requestBudget).toEqual({ perSecond: 10, burst: 50 })
      expect(
        (yield* configWith({ USER_REQUESTS_PER_SECOND: "3", USER_REQUEST_BURST: "7" })).requestBudget
      ).toEqual({ perSecond: 3, burst: 7 })
      for (const value of ["0", "-1", "fast", "1.5"]) {
        expect(Exit.isFailure(yield* Effect.exit(configWith({ USER_REQUESTS_PER_SECOND: value })))).toBe(true)
        expect(Exit.isFailure(yield* Effect.exit(configWith({ USER_REQUEST_BURST: value })))).toBe(true)
      }
    }))
})
