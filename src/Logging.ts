import { Effect, Layer, Logger } from "effect"
import { AppConfig } from "./Config.js"

/** JSON lines on stdout at `LOG_LEVEL` (D9). */
export const LoggingLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Layer.merge(Logger.json, Logger.minimumLogLevel(config.logLevel)))
)
