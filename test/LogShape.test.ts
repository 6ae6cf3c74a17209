import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { AppConfig } from "../src/Config.js"
import { privateRedis } from "./support/privateRedis.js"
import {
  exitWithin,
  freePort,
  readyzAnswers,
  serviceEnvironment,
  settlementQueue,
  startService,
  waitFor
} from "./support/processes.js"
import { createUser, PASSWORD } from "./support/TestApp.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/** Every line the programs write, as a log pipeline reads it (D9). */

const LEVELS = new Set(["debug", "info", "warn", "error"])

const linesOf = (output: string) => output.split("\n").filter((line) => line.trim() !== "")

/** Each line one JSON object of D9's shape; answers them parsed. */
const expectD9Lines = (output: string, service: string) =>
  linesOf(output).map((line) => {
    const parsed = JSON.parse(line) as Record<string, unknown>
    expect(typeof parsed.time === "string" && !Number.isNaN(Date.parse(parsed.time)), line).toBe(true)
    expect(LEVELS.has(String(parsed.level)), line).toBe(true)
    expect(typeof parsed.msg === "string" && parsed.msg !== "", line).toBe(true)
    expect(parsed.service, line).toBe(service)
    for (const effectField of ["logLevel", "annotations", "fiberId", "spans", "message"]) {
      expect(parsed, line).not.toHaveProperty(effectField)
    }
    for (const value of Object.values(parsed)) {
      expect(
        typeof value === "object" && value !== null && !Array.isArray(value),
        line
      ).toBe(false)
    }
    return parsed
  })

const statusOf = (url: string, init: RequestInit = {}) =>
  Effect.promise(() =>
    fetch(url, { ...init, signal: AbortSignal.timeout(5000) }).then((response) => response.status, () => 0)
  )

layer(TestSettlement(), { excludeTestServices: true, timeout: "120 seconds" })("logs (D9)", (it) => {
  describe("the API and the worker", () => {
    it.scoped("write only JSON lines with time, level, msg and service; request lines carry request_id; no secret", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const prefix = `${config.redisPrefix}:logs`
        const port = yield* freePort
        const base = `http://127.0.0.1:${port}`
        const environment = serviceEnvironment(config, prefix, { PORT: String(port), LOG_LEVEL: "debug" })
        const api = yield* startService("api", environment)
        const worker = yield* startService("worker", environment)
        yield* readyzAnswers(port, api)
        const user = yield* createUser()
        const json = { "content-type": "application/json" }
        expect(
          yield* statusOf(`${base}/auth/login`, {
            method: "POST",
            headers: json,
            body: JSON.stringify({ email: user.email, password: PASSWORD })
          })
        )
          .toBe(200)
        expect(
          yield* statusOf(`${base}/auth/login`, {
            method: "POST",
            headers: json,
            body: JSON.stringify({ email: user.email, password: "a wrong secret pw" })
          })
        )
          .toBe(401)
        expect(yield* statusOf(`${base}/auth/login`, { method: "POST", headers: json, body: "{" })).toBe(422)
        expect(yield* statusOf(`${base}/no/such/path`)).toBe(404)
        const account = yield* newAccount("10")
        const queue = yield* settlementQueue(config, prefix)
        const job = yield* Effect.promise(() =>
          queue.add("reserve", { account_id: account.id, session_id: "s", amount_usd: "1", idempotency_key: "k" })
        )
        yield* waitFor(
          "the job has completed",
          Effect.map(Effect.promise(() => job.isCompleted()), (done) => done ? Option.some(done) : Option.none()),
          { limit: "30 seconds", alive: [worker] }
        )
        api.signal("SIGTERM")
        worker.signal("SIGTERM")
        yield* exitWithin(api, "15 seconds")
        yield* exitWithin(worker, "15 seconds")

        const apiLines = expectD9Lines(api.output(), "api")
        const requests = apiLines.filter((line) => line.msg === "request")
        expect(requests.length).toBeGreaterThanOrEqual(5)
        for (const line of requests) expect(typeof line.request_id, JSON.stringify(line)).toBe("string")
        const workerLines = expectD9Lines(worker.output(), "worker")
        expect(workerLines.some((line) => line.msg === "settlement job")).toBe(true)
        for (const output of [api.output(), worker.output()]) {
          expect(output).not.toContain(PASSWORD)
          expect(output).not.toContain("a wrong secret pw")
        }
      }))

    it.scoped("a bad setting stops the API with one JSON line saying which", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const api = yield* startService("api", serviceEnvironment(config, `${config.redisPrefix}:bad`, { PORT: "abc" }))
        expect((yield* exitWithin(api, "20 seconds")).code).not.toBe(0)
        const lines = expectD9Lines(api.output(), "api")
        expect(lines).toHaveLength(1)
        expect(lines[0]).toMatchObject({ level: "error", msg: expect.stringContaining("PORT") })
      }))

    it.scoped("a Redis outage under the worker is one line when it starts and one when it ends", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const redis = yield* privateRedis()
        const worker = yield* startService(
          "worker",
          serviceEnvironment(config, `${config.redisPrefix}:outage`, { REDIS_URL: redis.url, LOG_LEVEL: "info" })
        )
        yield* waitFor(
          "the worker has started",
          Effect.sync(() => worker.output().includes("settlement worker started") ? Option.some(true) : Option.none()),
          { limit: "30 seconds", alive: [worker] }
        )
        yield* redis.stop
        yield* Effect.sleep("8 seconds")
        yield* redis.start
        yield* waitFor(
          "the worker says Redis is back",
          Effect.sync(() => worker.output().includes("reachable again") ? Option.some(true) : Option.none()),
          { limit: "30 seconds", alive: [worker] }
        )
        const lines = expectD9Lines(worker.output(), "worker")
        expect(lines.filter((line) => line.level === "error"), worker.output()).toHaveLength(1)
        expect(lines.filter((line) => String(line.msg).includes("reachable again"))).toHaveLength(1)
      }))
  })
})
