import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Deferred, Effect, FiberRef, HashMap, Layer, Logger, type LogLevel, Option, Ref } from "effect"
import { AppConfig } from "./Config.js"

/** Which program wrote a line (D9). */
export type ServiceName = "api" | "worker" | "webhooks" | "cli"

/** D9's level names, from Effect's. */
const levelOf = (level: LogLevel.LogLevel): "debug" | "info" | "warn" | "error" => {
  switch (level._tag) {
    case "Fatal":
    case "Error":
      return "error"
    case "Warning":
      return "warn"
    case "Info":
      return "info"
    default:
      return "debug"
  }
}

/** Fields every line has; an annotation of the same name does not overwrite them. */
const BASE_FIELDS = new Set(["time", "level", "msg", "service", "error", "stack"])

const textOf = (value: unknown): string => {
  if (typeof value === "string") return value
  if (value instanceof Error) return value.message
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * One JSON object per line, in the shape log pipelines expect (D9): `time`,
 * `level`, `msg`, `service`, then the annotations as flat fields (`request_id`
 * on every line a request caused); a failure's text as `error` and its trace
 * as `stack`, a field, never extra lines.
 */
export const jsonLines = (service: ServiceName, write: (line: string) => void) =>
  Logger.make(({ annotations, cause, date, logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    // An Error handed to a log call is the line's error, not part of its message.
    const errors = parts.filter((part): part is Error => part instanceof Error)
    const words = parts.filter((part) => !(part instanceof Error)).map(textOf).filter((word) => word !== "")
    const failure = Cause.isEmpty(cause) ? errors[0] === undefined ? undefined : failureOf(errors[0]) : failureOf(cause)
    const line: Record<string, unknown> = {
      time: date.toISOString(),
      level: levelOf(logLevel),
      msg: words.length > 0 ? words.join(" ") : failure?.text ?? "(no message)",
      service
    }
    for (const [key, value] of HashMap.toEntries(annotations)) {
      if (!BASE_FIELDS.has(key)) line[key] = value
    }
    if (failure !== undefined) {
      line.error = failure.text
      line.stack = failure.stack
    }
    write(JSON.stringify(line))
  })

/**
 * An error's message and what it wraps: a driver's "Failed to execute statement" says nothing
 * without "Connection terminated unexpectedly" behind it.
 */
const messageOf = (error: Error): string =>
  error.cause instanceof Error ? `${error.message}: ${messageOf(error.cause)}` : error.message

/** A failure as a line carries it: what it says, and the whole trace as one field. */
const failureOf = (failure: Error | Cause.Cause<unknown>) => {
  const stack = failure instanceof Error ? failure.stack ?? failure.message : Cause.pretty(failure)
  const squashed = failure instanceof Error ? failure : Cause.squash(failure)
  const text = squashed instanceof Error ? messageOf(squashed) : (stack.split("\n")[0] ?? "").replace(/^\w*Error: /, "")
  return { text: text === "" ? "unknown failure" : text, stack }
}

const stdout = (line: string) => {
  process.stdout.write(`${line}\n`)
}
const stderr = (line: string) => {
  process.stderr.write(`${line}\n`)
}

/** The program's logger: JSON lines (the CLI's on stderr: its stdout is the command's answer). */
export const loggerOf = (service: ServiceName) =>
  Logger.replace(Logger.defaultLogger, jsonLines(service, service === "cli" ? stderr : stdout))

/** Lines below `LOG_LEVEL` are dropped (D9). The logger itself is installed by `runMain`, around everything. */
export const LogLevelLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => Logger.minimumLogLevel(config.logLevel))
)

/**
 * What a program says when it is told to stop (D9): `draining`, once, when the signal reaches
 * the part that has work in flight, with what is still in flight (`requests_in_flight`,
 * `jobs_in_flight`, …), and `stopped`, with `duration_ms` since then, once everything it holds
 * has been released. Provided outermost, so its release (and the `stopped` line) comes last.
 */
export class Shutdown extends Effect.Service<Shutdown>()("Shutdown", {
  scoped: Effect.gen(function*() {
    /** When draining began, and the log level then: `LOG_LEVEL`'s layer is released before this one. */
    const started = yield* Ref.make(Option.none<{ readonly at: number; readonly level: LogLevel.LogLevel }>())
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Ref.get(started), (since) =>
        Option.match(since, {
          onNone: () => Effect.void,
          onSome: ({ at, level }) =>
            Effect.logInfo("stopped").pipe(
              Effect.annotateLogs({ duration_ms: Math.round(performance.now() - at) }),
              Logger.withMinimumLogLevel(level)
            )
        }))
    )
    const began = yield* Deferred.make<void>()
    return {
      draining: (inFlight: Readonly<Record<string, number>>) =>
        Effect.gen(function*() {
          const level = yield* FiberRef.get(FiberRef.currentMinimumLogLevel)
          yield* Ref.update(started, Option.orElse(() => Option.some({ at: performance.now(), level })))
          yield* Deferred.succeed(began, undefined)
          yield* Effect.logInfo("draining").pipe(Effect.annotateLogs(inFlight))
        }),
      /**
       * Completes when draining begins: answers that would never end on their own (the live event
       * stream, D17) end then, instead of holding the drain to its limit.
       */
      drainingBegan: Deferred.await(began)
    } as const
  })
}) {}

/** The `draining` line, through `Shutdown` where the program provides it (its `stopped` line then follows). */
export const logDraining = (inFlight: Readonly<Record<string, number>>) =>
  Effect.flatMap(Effect.serviceOption(Shutdown), (shutdown) =>
    Option.match(shutdown, {
      onNone: () => Effect.logInfo("draining").pipe(Effect.annotateLogs(inFlight)),
      onSome: (service) => service.draining(inFlight)
    }))

/**
 * No trace exporter is configured (D9 asks for logs and metrics), so every
 * span would be built and dropped: those of traced service methods, SQL
 * statements and, in the API, of each request. Whoever adds an exporter
 * provides it in place of this layer.
 */
export const TracingOff = Layer.setTracerEnabled(false)

/**
 * Runs a program until it ends, reporting a failure to start (or to keep
 * running) as one log line that says what happened, in the same shape as every
 * other line, even when the failure came before the logging layer was built
 * (a bad setting, a port in use).
 */
export const runMain = (service: ServiceName) => <E, A>(program: Effect.Effect<A, E>) =>
  NodeRuntime.runMain(
    program.pipe(
      Effect.tapErrorCause((cause) => Effect.logError(`stopped: ${failureOf(cause).text}`, cause)),
      Effect.provide(loggerOf(service))
    ),
    { disablePrettyLogger: true, disableErrorReporting: true }
  )
