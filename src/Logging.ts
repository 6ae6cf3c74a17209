import { Effect, Layer, Logger } from "effect"
import { AppConfig } from "./Config.js"

/** JSON lines on stdout at `LOG_LEVEL` (D9). */
export const LoggingLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Layer.merge(Logger.json, Logger.minimumLogLevel(config.logLevel)))
)

/**
 * No trace exporter is configured (D9 asks for logs and metrics), so every
 * span would be built and dropped: those of traced service methods, SQL
 * statements and, in the API, of each request. Whoever adds an exporter
 * provides it in place of this layer.
 */
export const TracingOff = Layer.setTracerEnabled(false)
