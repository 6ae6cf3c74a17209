import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { AppConfig } from "../src/Config.js"
import { privateRedis } from "./support/privateRedis.js"
import { freePort, readyzAnswers, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"

/** D14: the API and the worker say at start when Redis may evict queued jobs, and run on. */

const warningsOf = (output: string) =>
  output.split("\n").filter((line) => line.includes(`"maxmemory_policy"`)).map((line) =>
    JSON.parse(line) as Record<string, unknown>
  )

const startBoth = (redisArgs: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const redis = yield* privateRedis(redisArgs)
    const port = yield* freePort
    const environment = serviceEnvironment(config, `${config.redisPrefix}:eviction`, {
      PORT: String(port),
      REDIS_URL: redis.url,
      LOG_LEVEL: "info"
    })
    const api = yield* startService("api", environment)
    const worker = yield* startService("worker", environment)
    yield* readyzAnswers(port, api)
    yield* waitFor(
      "the worker has started",
      Effect.sync(() => worker.output().includes("settlement worker started") ? Option.some(true) : Option.none()),
      { limit: "30 seconds", alive: [worker] }
    )
    return { api, worker }
  })

layer(TestConfig(), { excludeTestServices: true, timeout: "90 seconds" })("Redis's eviction policy (D14)", (it) => {
  describe("at start", () => {
    it.scoped(
      "a policy other than noeviction is one warning naming it, in the API and the worker, which stay ready",
      () =>
        Effect.gen(function*() {
          const { api, worker } = yield* startBoth(["--maxmemory-policy", "allkeys-lru"])
          for (const child of [api, worker]) {
            const warnings = warningsOf(child.output())
            expect(warnings, child.output()).toHaveLength(1)
            expect(warnings[0]).toMatchObject({
              level: "warn",
              maxmemory_policy: "allkeys-lru",
              msg: expect.stringContaining("allkeys-lru")
            })
            expect(child.running()).toBe(true)
          }
        }),
      90_000
    )

    it.scoped("noeviction says nothing", () =>
      Effect.gen(function*() {
        const { api, worker } = yield* startBoth(["--maxmemory-policy", "noeviction"])
        expect(warningsOf(api.output())).toEqual([])
        expect(warningsOf(worker.output())).toEqual([])
      }), 90_000)
  })
})
