import { Effect, Option } from "effect"
import { Redis as IORedis } from "ioredis"
import { spawn } from "node:child_process"
import { freePort, waitFor } from "./processes.js"

/**
 * A Redis server of the test's own, on a free port, that the test may stop and
 * start again (the machine's shared one is never touched). Stopped for good
 * when the scope closes.
 */
export const privateRedis = (extraArgs: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const url = `redis://127.0.0.1:${port}`
    let child: ReturnType<typeof spawn> | undefined
    const answers = Effect.promise(async () => {
      const client = new IORedis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      client.on("error", () => {})
      try {
        await client.connect()
        return (await client.ping()) === "PONG" ? Option.some(true) : Option.none()
      } catch {
        return Option.none()
      } finally {
        client.disconnect()
      }
    })
    const start = Effect.gen(function*() {
      child = spawn("redis-server", [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        ...extraArgs
      ], {
        stdio: "ignore"
      })
      yield* waitFor(`a private Redis answers on ${port}`, answers, { limit: "10 seconds", every: "50 millis" })
    })
    /** SIGKILL by default; SIGTERM lets Redis write its append-only file first, as a clean restart does. */
    const stopWith = (signal: NodeJS.Signals) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          if (child === undefined || child.exitCode !== null) return resolve()
          child.once("exit", () => resolve())
          child.kill(signal)
        })
      )
    const stop = stopWith("SIGKILL")
    yield* Effect.acquireRelease(start, () => stop)
    return { url, port, stop, stopWith, start } as const
  })
