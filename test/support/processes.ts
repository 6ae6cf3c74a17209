import { Queue } from "bullmq"
import { Duration, Effect, Option, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { spawn } from "node:child_process"
import { request } from "node:http"
import { createServer } from "node:net"
import { onTestFailed } from "vitest"
import { programCommand, type ProgramName, ROOT } from "../../scripts/programs.mjs"
import type { AppConfig } from "../../src/Config.js"
import { SETTLEMENT_QUEUE } from "../../src/Settlement/Jobs.js"
import { UNBUDGETED } from "./budget.js"
import { childEnvironment } from "./childEnvironment.js"

/** Real processes of the service, for the tests that signal and kill them. */

const OUTPUT_KEPT = 64 * 1024

export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Child {
  readonly pid: number
  /**
   * The last 64 KiB the process printed, stdout and stderr together, for failure messages. It is
   * kept, never printed as it comes: a passing test's log is noise in the run's output. When the
   * test that started the process fails, it is printed with that test's failure.
   */
  readonly output: () => string
  readonly running: () => boolean
  /** Waits for the process to end. */
  readonly exited: Effect.Effect<Exited>
  readonly signal: (signal: NodeJS.Signals) => void
  /** kill -9 */
  readonly kill: () => void
}

/**
 * Runs a program of the service (`api`, `worker`, `webhooks`) as `npm start` runs it, from
 * the repository root, as one Node process, with exactly the environment given
 * (plus what Node needs to run). It is SIGKILLed when the scope closes, if it
 * still runs. The global set-up has compiled it.
 */
export const startService = (program: ProgramName, env: Readonly<Record<string, string>>) =>
  Effect.acquireRelease(
    Effect.sync((): Child => {
      const [file, args, own] = programCommand(program)
      const child = spawn(file, args, {
        cwd: ROOT,
        env: childEnvironment({ NODE_ENV: "test", ...own, ...env }),
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      const keep = (chunk: Buffer) => {
        output = (output + chunk.toString("utf8")).slice(-OUTPUT_KEPT)
      }
      child.stdout.on("data", keep)
      child.stderr.on("data", keep)
      showOnFailure(`${program} (pid ${child.pid ?? "not started"})`, () => output)
      const exited = new Promise<Exited>((resolve) => {
        child.once("exit", (code, signal) => resolve({ code, signal }))
        child.once("error", (error) => {
          keep(Buffer.from(`spawn failed: ${error.message}\n`))
          resolve({ code: null, signal: null })
        })
      })
      let done = false
      void exited.then(() => {
        done = true
      })
      return {
        pid: child.pid ?? 0,
        output: () => output,
        running: () => !done,
        exited: Effect.promise(() => exited),
        signal: (signal) => {
          child.kill(signal)
        },
        kill: () => {
          child.kill("SIGKILL")
        }
      }
    }),
    (child) =>
      Effect.suspend(() => {
        if (child.running()) child.kill()
        return child.exited.pipe(Effect.timeout("5 seconds"), Effect.ignore)
      })
  )

/**
 * Prints what a process printed when the test it runs in fails, as that test's own output (the
 * run shows the console of failed tests only). A process started outside a test, by a layer
 * shared by a file's tests, has no test of its own: `waitFor` and `exitWithin` show its output.
 */
const showOnFailure = (name: string, output: () => string) => {
  try {
    onTestFailed(() => {
      console.error(`--- ${name} printed:\n${output()}\n--- end of ${name}'s output`)
    })
  } catch {
    // not inside a test
  }
}

/** Waits for the process to end, failing the test if it takes longer than `limit`. */
export const exitWithin = (child: Child, limit: Duration.DurationInput) =>
  child.exited.pipe(
    Effect.timeoutFail({
      duration: limit,
      onTimeout: () =>
        new Error(`the process did not exit within ${Duration.format(limit)}; it printed:\n${child.output()}`)
    }),
    Effect.orDie
  )

/** The environment of a service process sharing the test file's database and Redis, its keys and queue under its own prefix. */
export const serviceEnvironment = (
  config: AppConfig,
  redisPrefix: string,
  overrides: Readonly<Record<string, string>> = {}
) => ({
  DATABASE_URL: Redacted.value(config.databaseUrl),
  REDIS_URL: Redacted.value(config.redisUrl),
  REDIS_PREFIX: redisPrefix,
  SETTLEMENT_QUEUE_PREFIX: redisPrefix,
  ...Option.match(config.authSecret, {
    onNone: () => ({}),
    onSome: (secret) => ({ AUTH_SECRET: Redacted.value(secret) })
  }),
  LOG_LEVEL: "warning",
  // Not held to a user's request budget unless the test sets one (D15; test/RequestBudget.test.ts).
  ...UNBUDGETED,
  ...overrides
})

/**
 * The settlement queue (or another of the service's queues, by name) under a key prefix, as a
 * producer or an operator sees it; closed with the scope.
 */
export const settlementQueue = (config: AppConfig, redisPrefix: string, name: string = SETTLEMENT_QUEUE) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const connection = new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })
      connection.on("error", () => {})
      const queue = new Queue(name, { connection, prefix: redisPrefix })
      // A test that restarts Redis meets errors here by design; unheard, BullMQ prints each to the console.
      queue.on("error", () => {})
      return { connection, queue }
    }),
    ({ connection, queue }) =>
      Effect.promise(async () => {
        await queue.close()
        await connection.quit().catch(() => "OK")
      })
  ).pipe(Effect.map(({ queue }) => queue))

/** A TCP port nobody listens on right now: the service cannot be told to pick one itself. */
export const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * Polls `check` every `every` until it answers a value, failing with what the
 * process printed if `limit` passes first or the process exits meanwhile.
 */
export const waitFor = <A, E, R>(
  what: string,
  check: Effect.Effect<Option.Option<A>, E, R>,
  options: {
    readonly limit: Duration.DurationInput
    readonly every?: Duration.DurationInput
    readonly alive?: ReadonlyArray<Child>
  }
) =>
  Effect.gen(function*() {
    for (;;) {
      const found = yield* check
      if (Option.isSome(found)) return found.value
      const dead = (options.alive ?? []).find((child) => !child.running())
      if (dead !== undefined) {
        return yield* Effect.dieMessage(`a process exited while waiting until ${what}; it printed:\n${dead.output()}`)
      }
      yield* Effect.sleep(options.every ?? "100 millis")
    }
  }).pipe(
    Effect.timeoutFail({
      duration: options.limit,
      onTimeout: () =>
        new Error(`timed out waiting until ${what}${
          (options.alive ?? []).map((child) => `\n--- output:\n${child.output()}`).join("")
        }`)
    }),
    Effect.orDie
  )

/**
 * Waits until the API on `port` answers `/readyz` with `status` (200 by default): readiness is a
 * real answer, never an open port. Fails the test with the process's output if it exits meanwhile.
 */
export const readyzAnswers = (port: number, api: Child, status = 200, limit: Duration.DurationInput = "30 seconds") =>
  waitFor(
    `/readyz answers ${status}`,
    Effect.promise(() =>
      fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(3000) }).then(
        (response) => response.status === status ? Option.some(status) : Option.none(),
        () => Option.none()
      )
    ),
    { limit, alive: [api] }
  )

export type Outcome =
  | { readonly _tag: "Answered"; readonly status: number; readonly body: string }
  | { readonly _tag: "Refused" }
  | { readonly _tag: "Broken"; readonly reason: string }

/**
 * One JSON request on a connection of its own: `sent` once the request is
 * written, or has failed; `outcome` once it is answered. A connection refused
 * is a clean answer from a server that has stopped listening (a client or a
 * load balancer sends it elsewhere); a reset, a hang-up, a truncated body or
 * no answer within 20 s is not.
 */
export const send = (
  port: number,
  options: {
    readonly method: string
    readonly path: string
    readonly body: string
    readonly headers?: Readonly<Record<string, string>>
  }
) => {
  let sent: () => void = () => {}
  const written = new Promise<void>((resolve) => {
    sent = resolve
  })
  const outcome = new Promise<Outcome>((resolve) => {
    const req = request({
      host: "127.0.0.1",
      port,
      method: options.method,
      path: options.path,
      agent: false,
      headers: {
        ...options.headers,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(options.body)
      },
      timeout: 20_000
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        const expected = Number(response.headers["content-length"] ?? Buffer.byteLength(text))
        resolve(
          response.complete && Buffer.byteLength(text) === expected
            ? { _tag: "Answered", status: response.statusCode ?? 0, body: text }
            : { _tag: "Broken", reason: "truncated response" }
        )
      })
      response.on("error", (error) => resolve({ _tag: "Broken", reason: `response: ${error.message}` }))
    })
    req.on("finish", () => sent())
    req.on("timeout", () => req.destroy(new Error("no answer within 20 s")))
    req.on("error", (error: NodeJS.ErrnoException) => {
      sent()
      resolve(
        error.code === "ECONNREFUSED"
          ? { _tag: "Refused" }
          : { _tag: "Broken", reason: `${error.code ?? ""} ${error.message}` }
      )
    })
    req.end(options.body)
  })
  return { sent: written, outcome }
}
