import { describe, expect, layer } from "@effect/vitest"
import { Cause, Effect, Option, Redacted } from "effect"
import { spawn, spawnSync } from "node:child_process"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { TESTED_NODE } from "../scripts/with-node.mjs"
import { AppConfig } from "../src/Config.js"
import { childEnvironment, runToEnd } from "./support/childEnvironment.js"
import { freePort, waitFor } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"

const TESTED_LINES = Object.keys(TESTED_NODE)
const NEWEST = String(Math.max(...TESTED_LINES.map(Number)))

/** A Node on this machine that is not a tested line (the system's own, often), with its version. */
const untestedNode = [...(process.env.PATH ?? "").split(path.delimiter), "/usr/bin", "/usr/local/bin"]
  .map((dir) => path.join(dir, "node"))
  .flatMap((binary) => {
    const result = spawnSync(binary, ["--version"], { encoding: "utf8" })
    const version = result.status === 0 ? result.stdout.trim().replace(/^v/, "") : ""
    return version !== "" && !TESTED_LINES.includes(version.split(".")[0] ?? "") ? [{ binary, version }] : []
  })[0]

/** `npm start` as a user under that Node runs it: the set-up itself, stopped (SIGTERM) when the scope closes. */
const npmStart = (node: string, env: Readonly<Record<string, string>>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(node, [path.join(ROOT, "scripts/setup.mjs"), "start"], {
        cwd: ROOT,
        env: childEnvironment(env),
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      return { child, exited, stderr: () => stderr, output: () => `${stderr}\n--- stdout:\n${stdout}` }
    }),
    ({ child, exited }) =>
      Effect.promise(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
        return exited
      }).pipe(Effect.timeout("30 seconds"), Effect.ignore)
  )

layer(TestConfig(), { excludeTestServices: true, timeout: "120 seconds" })(
  "set-up under an untested Node (D11)",
  (it) => {
    describe.skipIf(untestedNode === undefined)(
      `with ${
        untestedNode === undefined ? "no untested Node on this machine (skipped)" : `Node ${untestedNode.version}`
      }`,
      () => {
        it.scoped(
          "npm start says so in one line and runs the service under the newest tested line",
          () =>
            Effect.gen(function*() {
              if (untestedNode === undefined) return
              const config = yield* AppConfig
              const port = yield* freePort
              const setup = yield* npmStart(untestedNode.binary, {
                PORT: String(port),
                DATABASE_URL: Redacted.value(config.databaseUrl),
                REDIS_URL: Redacted.value(config.redisUrl),
                REDIS_PREFIX: config.redisPrefix,
                SETTLEMENT_QUEUE_PREFIX: config.settlementQueuePrefix,
                LOG_LEVEL: "warning"
              })
              yield* waitFor(
                "the set-up says the API is ready",
                Effect.sync(() =>
                  setup.stderr().includes(`ready on http://localhost:${port}`) ? Option.some(true) : Option.none()
                ),
                { limit: "90 seconds", every: "250 millis" }
              ).pipe(
                Effect.timeoutFailCause({
                  duration: "95 seconds",
                  onTimeout: () => Cause.die(`the set-up never said it was ready:\n${setup.output()}`)
                })
              )

              const announced = setup.stderr().split("\n").filter((line) => line.includes("is not a tested line"))
              expect(announced, setup.output()).toEqual([
                `[setup] Node ${untestedNode.version} is not a tested line (${
                  TESTED_LINES.join(", ")
                }); running under Node ${TESTED_NODE[NEWEST]} (.data/node/${NEWEST})`
              ])
              // The API's own process metrics say which Node runs it.
              const metrics = yield* Effect.promise(() =>
                fetch(`http://127.0.0.1:${port}/metrics`).then((response) => response.text())
              )
              expect(metrics).toMatch(new RegExp(`nodejs_version_info\\{version="v${TESTED_NODE[NEWEST]}"`))

              setup.child.kill("SIGTERM")
              const code = yield* Effect.promise(() => setup.exited)
              expect(code, setup.output()).toBe(0)
            }),
          150_000
        )

        it.effect(
          "npm run --silent cli prints the command's JSON and nothing else: no Node-line notice (D10)",
          () =>
            Effect.gen(function*() {
              if (untestedNode === undefined) return
              const config = yield* AppConfig
              // `npm` as a shell finds it, run by the untested Node first on PATH: what a newcomer types.
              const env = {
                PATH: [path.dirname(untestedNode.binary), childEnvironment().PATH ?? ""].join(path.delimiter),
                DATABASE_URL: Redacted.value(config.databaseUrl),
                REDIS_URL: Redacted.value(config.redisUrl)
              }
              const run = () =>
                Effect.promise(() =>
                  runToEnd("npm", ["run", "--silent", "cli", "--", "org", "list"], { cwd: ROOT, env, timeout: 120_000 })
                )
              yield* run() // the first may still build or install; the second finds nothing to do
              const { seconds, status, stderr, stdout } = yield* run()
              expect(status, stderr).toBe(0)
              expect(stderr).toBe("")
              expect(JSON.parse(stdout)).toEqual({ orgs: [] })
              yield* Effect.logInfo("npm run --silent cli with nothing to set up").pipe(
                Effect.annotateLogs({ seconds: seconds.toFixed(2) })
              )
            }),
          300_000
        )
      }
    )
  }
)
