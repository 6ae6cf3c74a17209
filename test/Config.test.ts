import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, LogLevel } from "effect"
import { AppConfig } from "../src/Config.js"

const logLevelWith = (value: string) =>
  Effect.map(AppConfig, (config) => config.logLevel).pipe(
    Effect.provide(AppConfig.Default.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["LOG_LEVEL", value]]))))))
  )

describe("configuration", () => {
  it.effect("LOG_LEVEL takes the levels the README lists, in any case", () =>
    Effect.gen(function*() {
      expect(yield* logLevelWith("debug")).toBe(LogLevel.Debug)
      expect(yield* logLevelWith("info")).toBe(LogLevel.Info)
      expect(yield* logLevelWith("warning")).toBe(LogLevel.Warning)
      expect(yield* logLevelWith("WARNING")).toBe(LogLevel.Warning)
      expect(yield* logLevelWith("warn")).toBe(LogLevel.Warning)
      expect(yield* logLevelWith("error")).toBe(LogLevel.Error)
    }))

  it.effect("an unknown LOG_LEVEL refuses to start, naming the levels", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(logLevelWith("loud"))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("Expected debug, info, warning or error")
    }))
})
