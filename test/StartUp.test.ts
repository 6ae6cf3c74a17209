import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { createServer } from "node:net"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { runToEnd } from "./support/childEnvironment.js"
import { exitWithin, freePort, serviceEnvironment, startService } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"

/** Something else already listening on a port, for as long as the scope is open. */
const occupied = Effect.gen(function*() {
  const port = yield* freePort
  yield* Effect.acquireRelease(
    Effect.async<ReturnType<typeof createServer>>((resume) => {
      const server = createServer((socket) => socket.end("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"))
      server.listen(port, () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )
  return port
})

layer(TestConfig(), { excludeTestServices: true, timeout: "90 seconds" })(
  "starting on a port in use (D15)",
  (it) => {
    describe("the API", () => {
      it.scoped("exits at once, non-zero, with one JSON log line naming the port", () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const port = yield* occupied
          const api = yield* startService(
            "api",
            serviceEnvironment(config, `${config.redisPrefix}:api`, { PORT: String(port) })
          )
          const exited = yield* exitWithin(api, "20 seconds")
          expect(exited.code).not.toBe(0)
          const lines = api.output().split("\n").filter((line) => line.trim() !== "")
          const naming = lines.filter((line) => line.includes(`port ${port} is already in use`))
          expect(naming, api.output()).toHaveLength(1)
          expect(JSON.parse(naming[0] ?? "")).toMatchObject({ level: "error", service: "api" })
        }))
    })

    describe("npm start", () => {
      it.scoped("says the port is in use and starts nothing, rather than reporting the other process ready", () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const port = yield* occupied
          const result = yield* Effect.promise(() =>
            runToEnd(process.execPath, [path.join(ROOT, "scripts/setup.mjs"), "start"], {
              cwd: ROOT,
              timeout: 60_000,
              env: {
                PORT: String(port),
                DATABASE_URL: Redacted.value(config.databaseUrl),
                REDIS_URL: Redacted.value(config.redisUrl),
                REDIS_PREFIX: config.redisPrefix,
                SETTLEMENT_QUEUE_PREFIX: config.settlementQueuePrefix
              }
            })
          )
          expect(result.status).toBe(1)
          expect(result.stderr).toContain(`port ${port} is already in use`)
          expect(result.stderr).not.toContain("ready on")
        }))
    })
  }
)
