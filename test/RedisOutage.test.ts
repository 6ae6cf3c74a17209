import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { AppConfig } from "../src/Config.js"
import { privateRedis } from "./support/privateRedis.js"
import { freePort, readyzAnswers, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { createUser, PASSWORD, TestApp } from "./support/TestApp.js"

/**
 * Redis goes away under a running API (a Redis of the test's own, stopped and
 * started again): nothing the API answers waits on it for long, and it
 * recovers by itself.
 */

const timed = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const started = performance.now()
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(20_000) })
    const text = await response.text()
    return { status: response.status, text, seconds: (performance.now() - started) / 1000 }
  })

layer(TestApp(), { excludeTestServices: true, timeout: "120 seconds" })("Redis away (D9)", (it) => {
  describe("a running API", () => {
    it.scoped("answers /metrics without the queue depth, /readyz 503 and the dashboard 503, promptly; then recovers", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const redis = yield* privateRedis()
        const port = yield* freePort
        const base = `http://127.0.0.1:${port}`
        const api = yield* startService(
          "api",
          serviceEnvironment(config, `${config.redisPrefix}:api`, { PORT: String(port), REDIS_URL: redis.url })
        )
        yield* readyzAnswers(port, api)
        const operator = yield* createUser({ operator: true })
        const login = yield* timed(`${base}/auth/login`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: operator.email, password: PASSWORD })
        })
        const token = (JSON.parse(login.text) as { access_token: string }).access_token
        const before = yield* timed(`${base}/metrics`)
        expect(before.text).toMatch(/^account_api_queue_metrics_available 1$/m)
        expect(before.text).toMatch(/account_api_queue_jobs\{state="waiting"\} \d+/)

        yield* redis.stop
        const metrics = yield* timed(`${base}/metrics`)
        expect(metrics.status).toBe(200)
        expect(metrics.seconds).toBeLessThan(5)
        expect(metrics.text).toMatch(/^account_api_queue_metrics_available 0$/m)
        expect(metrics.text).not.toMatch(/account_api_queue_jobs\{/)
        const ready = yield* timed(`${base}/readyz`)
        expect(ready.status).toBe(503)
        expect(ready.seconds).toBeLessThan(5)
        const board = yield* timed(`${base}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${token}` } })
        expect(board.seconds).toBeLessThan(8)
        expect(board.status).toBe(503)
        expect(JSON.parse(board.text)).toMatchObject({ status: 503, code: "unavailable" })

        yield* redis.start
        yield* readyzAnswers(port, api)
        yield* waitFor(
          "/metrics shows the queue again",
          Effect.map(
            timed(`${base}/metrics`),
            (reply) => /^account_api_queue_metrics_available 1$/m.test(reply.text) ? Option.some(true) : Option.none()
          ),
          { limit: "30 seconds", alive: [api] }
        )
        expect(api.running()).toBe(true)
      }))
  })
})
