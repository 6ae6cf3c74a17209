import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { Agent, request } from "node:http"
import { AppConfig } from "../src/Config.js"
import {
  exitWithin,
  freePort,
  readyzAnswers,
  serviceEnvironment,
  settlementQueue,
  startService,
  waitFor
} from "./support/processes.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * What the API and the worker say when told to stop (D9), read from a real process's output as
 * an operator reads it: `draining` with what is still in flight, then `stopped` with the time it
 * took, the last line. Under sign-in traffic on keep-alive connections, a request the API read
 * is answered, never reset.
 */

const TestProcesses = ProcessTestDatabase()

const linesOf = (output: string) =>
  output.split("\n").filter((line) => line.trim().startsWith("{")).map((line) =>
    JSON.parse(line) as Record<string, unknown>
  )

/** The shutdown's lines: one `draining` with the counts named, then `stopped`, last, with its duration. */
const expectShutdownLines = (output: string, service: string, counts: ReadonlyArray<string>) => {
  const lines = linesOf(output)
  const draining = lines.filter((line) => line.msg === "draining")
  expect(draining, output).toHaveLength(1)
  expect(draining[0]).toMatchObject({ level: "info", service })
  for (const count of counts) expect(Number.isInteger(draining[0]?.[count]), `${count} in ${output}`).toBe(true)
  const stopped = lines.at(-1)
  expect(stopped, output).toMatchObject({ level: "info", msg: "stopped", service })
  expect(typeof stopped?.duration_ms === "number" && stopped.duration_ms >= 0).toBe(true)
  expect(lines.indexOf(draining[0] ?? {})).toBeLessThan(lines.length - 1)
  return { draining: draining[0] ?? {}, stopped: stopped ?? {} }
}

type Outcome =
  | { readonly _tag: "Answered"; readonly id: string; readonly status: number }
  | { readonly _tag: "Failed"; readonly id: string; readonly code: string }

/** One sign-in on a keep-alive connection of `agent`, with a request id of ours the API logs. */
const signIn = (port: number, agent: Agent, id: string, body: string) =>
  new Promise<Outcome>((resolve) => {
    const outgoing = request({
      host: "127.0.0.1",
      port,
      agent,
      method: "POST",
      path: "/auth/login",
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-request-id": id }
    }, (response) => {
      response.resume()
      response.on("end", () => resolve({ _tag: "Answered", id, status: response.statusCode ?? 0 }))
      response.on("error", (error: NodeJS.ErrnoException) => resolve({ _tag: "Failed", id, code: error.code ?? "" }))
    })
    outgoing.on("error", (error: NodeJS.ErrnoException) => resolve({ _tag: "Failed", id, code: error.code ?? "" }))
    outgoing.end(body)
  })

layer(TestProcesses, { excludeTestServices: true, timeout: "90 seconds" })("shutdown (D9)", (it) => {
  describe("the API", () => {
    it.scoped(
      "SIGTERM under sign-ins on keep-alive connections: draining, stopped, every request it read answered, exit 0",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          // Sign-in counts against per-user limits (D2): twenty users share the load.
          const users = yield* Effect.all(Array.from({ length: 20 }, () => createUser()))
          const bodies = users.map((user) => JSON.stringify({ email: user.email, password: PASSWORD }))
          const port = yield* freePort
          const api = yield* startService(
            "api",
            serviceEnvironment(config, `${config.redisPrefix}:shutdown-api`, { PORT: String(port), LOG_LEVEL: "info" })
          )
          yield* readyzAnswers(port, api)

          // Four clients, each signing in again and again on its own keep-alive connection, until refused.
          const outcomes: Array<Outcome> = []
          const client = async (n: number) => {
            const agent = new Agent({ keepAlive: true, maxSockets: 1 })
            for (let i = 0;; i++) {
              const outcome = await signIn(port, agent, `shutdown-${n}-${i}`, bodies[(n * 5 + i) % bodies.length] ?? "")
              outcomes.push(outcome)
              if (outcome._tag === "Failed" && outcome.code === "ECONNREFUSED") break
              if (outcomes.filter((o) => o._tag === "Failed").length > 50) break
            }
            agent.destroy()
          }
          const clients = Promise.all([0, 1, 2, 3].map(client))
          yield* waitFor(
            "sign-ins are answered",
            Effect.sync(() => outcomes.length >= 8 ? Option.some(true) : Option.none()),
            { limit: "30 seconds", every: "20 millis", alive: [api] }
          )
          api.signal("SIGTERM")
          const exited = yield* exitWithin(api, "15 seconds")
          yield* Effect.promise(() => clients)

          expect(exited).toEqual({ code: 0, signal: null })
          const { draining } = expectShutdownLines(api.output(), "api", ["requests_in_flight", "connections_open"])
          expect(draining.connections_open).toBeGreaterThanOrEqual(1)
          // What the API read, it logged (one `request` line each, by our request id) and answered.
          const read = new Set(
            linesOf(api.output()).filter((line) => line.msg === "request").map((line) => line.request_id)
          )
          const answered = outcomes.filter((outcome) => outcome._tag === "Answered")
          expect(answered.length).toBeGreaterThan(8)
          for (const outcome of answered) expect([200, 429], outcome.id).toContain(outcome.status)
          const resetAfterRead = outcomes.filter((outcome) => outcome._tag === "Failed" && read.has(outcome.id))
          expect(resetAfterRead).toEqual([])
          // Each client ended on a refused connection once the API had gone.
          expect(outcomes.filter((outcome) => outcome._tag === "Failed" && outcome.code === "ECONNREFUSED").length)
            .toBe(4)
        }),
      90_000
    )
  })

  describe("the settlement worker", () => {
    it.scoped(
      "SIGTERM with jobs in flight: draining with the jobs in flight, stopped, exit 0",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const prefix = `${config.redisPrefix}:shutdown-worker`
          const queue = yield* settlementQueue(config, prefix)
          const account = yield* newAccount("100000")
          yield* Effect.promise(() =>
            queue.addBulk(Array.from({ length: 600 }, (_, n) => ({
              name: "reserve",
              data: { account_id: account.id, session_id: `s-${n}`, amount_usd: "0.01", idempotency_key: `k-${n}` },
              opts: { jobId: `shutdown-${n}` }
            })))
          )
          const worker = yield* startService("worker", serviceEnvironment(config, prefix, { LOG_LEVEL: "info" }))
          yield* waitFor(
            "jobs are in flight",
            Effect.map(
              Effect.promise(() => queue.getJobCounts("completed")),
              (counts) => (counts.completed ?? 0) >= 50 ? Option.some(counts) : Option.none()
            ),
            { limit: "30 seconds", every: "20 millis", alive: [worker] }
          )
          worker.signal("SIGTERM")
          expect(yield* exitWithin(worker, "15 seconds")).toEqual({ code: 0, signal: null })
          expectShutdownLines(worker.output(), "worker", ["jobs_in_flight"])
          // What it took, it finished: nothing is left active.
          expect((yield* Effect.promise(() => queue.getJobCounts("active"))).active).toBe(0)
        }),
      90_000
    )
  })
})
