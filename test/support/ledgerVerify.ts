import { Effect, Redacted } from "effect"
import { execFile } from "node:child_process"
import { programCommand, ROOT } from "../../scripts/programs.mjs"
import { AppConfig } from "../../src/Config.js"
import { childEnvironment } from "./childEnvironment.js"

/**
 * `cli ledger verify` (D13) as `npm run --silent cli --` runs it, on the test's database; the
 * whole-books run stores its drift figure (D19) under `redisPrefix` for the workers' gauges.
 */
export const ledgerVerify = (args: ReadonlyArray<string>, redisPrefix?: string) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const [file, programArgs] = programCommand("cli", { args: ["ledger", "verify", ...args] })
    return yield* Effect.async<{ readonly status: number; readonly stdout: string; readonly stderr: string }>(
      (resume) => {
        execFile(file, programArgs, {
          cwd: ROOT,
          encoding: "utf8",
          env: childEnvironment({
            DATABASE_URL: Redacted.value(config.databaseUrl),
            REDIS_URL: Redacted.value(config.redisUrl),
            REDIS_PREFIX: redisPrefix ?? config.redisPrefix,
            LOG_LEVEL: "warning"
          })
        }, (error, stdout, stderr) => {
          resume(Effect.succeed({
            status: error === null ? 0 : typeof error.code === "number" ? error.code : -1,
            stdout,
            stderr
          }))
        })
      }
    )
  })
