import { ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Layer } from "effect"
import { Accounts } from "./Accounts.js"
import { cli } from "./Cli/Commands.js"
import { AppConfig } from "./Config.js"
import { loggerOf } from "./Logging.js"
import { DatabaseLive } from "./Sql.js"

cli(process.argv).pipe(
  Effect.tapErrorCause((cause) => {
    const error = Cause.squash(cause)
    const failed = Effect.sync(() => {
      process.exitCode = 1
    })
    // @effect/cli has already explained a usage error on stderr.
    return ValidationError.isValidationError(error)
      ? failed
      : Effect.zipRight(failed, Effect.logError(error instanceof Error ? error.message : String(error)))
  }),
  Effect.provide(Accounts.Default.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(AppConfig.Default))),
  // stdout carries only the command's JSON; logs and errors go to stderr, as JSON lines (D9).
  Effect.provide([NodeContext.layer, loggerOf("cli")]),
  (program) => NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
)
