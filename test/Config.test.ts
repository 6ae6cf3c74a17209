import { describe, expect, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Layer, LogLevel } from "effect"
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
