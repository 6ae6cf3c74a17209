import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, LogLevel } from "effect"
import { AppConfig } from "../src/Config.js"

const configWith = (settings: Record<string, string>) =>
  Effect.provide(AppConfig, AppConfig.Default.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson(settings)))))

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
