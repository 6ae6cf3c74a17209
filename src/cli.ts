import { CliConfig, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Layer } from "effect"
import { Accounts } from "./Accounts.js"
import { Credentials } from "./Auth/Credentials.js"
import { Books } from "./Books.js"
import { cli } from "./Cli/Commands.js"
import { AppConfig } from "./Config.js"
import { loggerOf } from "./Logging.js"
import { DatabaseLive } from "./Sql.js"

/** Help and usage are styled for a terminal; piped or redirected, they are plain text (D10). */
const ESCAPE = String.fromCharCode(0x1b)
const ANSI = new RegExp(`${ESCAPE}\\[[0-9;]*m`, "g")
const plainUnlessTerminal = <A, E, R>(program: Effect.Effect<A, E, R>) =>
  process.stdout.isTTY === true ? program : Effect.consoleWith((console) => {
    const plain = (args: ReadonlyArray<unknown>) =>
      args.map((arg) => typeof arg === "string" ? arg.replace(ANSI, "") : arg)
    return Effect.withConsole(program, {
      ...console,
      log: (...args) => console.log(...plain(args)),
      error: (...args) => console.error(...plain(args)),
      unsafe: {
        ...console.unsafe,
        log: (...args) => console.unsafe.log(...plain(args)),
        error: (...args) => console.unsafe.error(...plain(args))
      }
    })
  })

cli(process.argv).pipe(
  plainUnlessTerminal,
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
  Effect.provide(
    Layer.mergeAll(Accounts.Default, Credentials.Default, Books.Default).pipe(
      Layer.provideMerge(DatabaseLive),
      // Kept for `ledger verify`, which alone opens Redis (D19).
      Layer.provideMerge(AppConfig.Default)
    )
  ),
  // stdout carries only the command's JSON; logs and errors go to stderr, as JSON lines (D9).
  Effect.provide([NodeContext.layer, loggerOf("cli")]),
  // `--help` opens with the commands (D10): @effect/cli's generic options (--completions,
  // --log-level, --wizard, --version) still work but are not listed before them.
  Effect.provide(CliConfig.layer({ showBuiltIns: false })),
  (program) => NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
)
