import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Layer, Logger } from "effect"
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

/**
 * Runs a program until it ends, reporting a failure to start (or to keep
 * running) as one log line that says what happened, rather than the runtime's
 * own report of the whole cause.
 */
export const runMain = <E, A>(program: Effect.Effect<A, E>) =>
  NodeRuntime.runMain(
    program.pipe(
      Effect.tapErrorCause((cause) => {
        const failure = Cause.squash(cause)
        const reason = failure instanceof Error ? failure.message : String(failure)
        return Effect.logError(`stopped: ${reason}`).pipe(Effect.annotateLogs("cause", Cause.pretty(cause)))
      }),
      // JSON even when the failure came before the logging layer was built (a bad setting, say).
      Effect.provide(Logger.json)
    ),
    { disablePrettyLogger: true, disableErrorReporting: true }
  )
