import { ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Layer, Logger } from "effect"
import { Accounts } from "./Accounts.js"
import { cli } from "./Cli/Commands.js"
import { AppConfig } from "./Config.js"
import { DatabaseLive } from "./Sql.js"

// stdout carries only the command's JSON; logs and errors go to stderr.
const StderrLogger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

cli(process.argv).pipe(
  Effect.tapErrorCause((cause) =>
    Effect.sync(() => {
      const error = Cause.squash(cause)
      // @effect/cli has already explained a usage error on stderr.
      if (!ValidationError.isValidationError(error)) {
        process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`)
      }
      process.exitCode = 1
    })
  ),
  Effect.provide(Accounts.Default.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(AppConfig.Default))),
  Effect.provide([NodeContext.layer, StderrLogger]),
  (program) => NodeRuntime.runMain(program, { disableErrorReporting: true })
)
