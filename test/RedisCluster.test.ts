import { describe, expect, it, layer } from "@effect/vitest"
import { Queue } from "bullmq"
import { Cause, ConfigProvider, Effect, Exit, Layer, Option, Redacted } from "effect"
import { Cluster } from "ioredis"
import { AppConfig } from "../src/Config.js"
import { SETTLEMENT_QUEUE } from "../src/Settlement/Jobs.js"
import { privateRedisCluster } from "./support/privateRedisCluster.js"
import { exitWithin, freePort, readyzAnswers, startService, waitFor } from "./support/processes.js"
import {
  allFinished,
  distinctJobs,
  expectBooksMatch,
  QUICK_RECOVERY,
  workerCount,
  workload
} from "./support/settlementLoad.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D18: Redis Cluster for the queue and the service's keys. A real three-master cluster of
 * the test's own; the API and two workers with REDIS_CLUSTER_NODES and the `{bull}` queue
 * prefix; a plain BullMQ producer on an ioredis Cluster connection; the sign-in limit (a
 * script over three keys, one slot); the fleet's metrics; a worker SIGKILLed mid-queue.
 */

const TestDatabase = ProcessTestDatabase()

const configWith = (settings: Record<string, string>) =>
  Effect.exit(Effect.provide(
    AppConfig,
    AppConfig.Default.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromJson(settings))))
  ))

describe("REDIS_CLUSTER_NODES", () => {
  it.effect("with a cluster, a queue prefix without a hash tag is refused, saying what to set", () =>
    Effect.gen(function*() {
      const refused = yield* configWith({ REDIS_CLUSTER_NODES: "10.0.0.1:6379,10.0.0.2:6379" })
      expect(Exit.isFailure(refused)).toBe(true)
      if (Exit.isFailure(refused)) expect(Cause.pretty(refused.cause)).toContain("must be a hash tag, such as {bull}")
      const taken = yield* configWith({
        REDIS_CLUSTER_NODES: "10.0.0.1:6379,10.0.0.2:6379",
        SETTLEMENT_QUEUE_PREFIX: "{bull}"
      })
      expect(Exit.isSuccess(taken) && taken.value.redisClusterNodes).toEqual([
        { host: "10.0.0.1", port: 6379 },
        { host: "10.0.0.2", port: 6379 }
      ])
      const malformed = yield* configWith({ REDIS_CLUSTER_NODES: "redis-1", SETTLEMENT_QUEUE_PREFIX: "{bull}" })
      expect(Exit.isFailure(malformed)).toBe(true)
      // Without a cluster, the prefix is BullMQ's default, as before.
      const single = yield* configWith({})
      expect(Exit.isSuccess(single) && single.value.settlementQueuePrefix).toBe("bull")
    }))
})

const settledTotal = (exposition: string) =>
  exposition.split("\n")
    .map((line) => line.match(/^account_api_settlement_jobs_total\{([^}]*)\} (\S+)$/))
    .flatMap((match) => match !== null && !(match[1] ?? "").includes(`outcome="retry"`) ? [Number(match[2])] : [])
    .reduce((sum, value) => sum + value, 0)

const metricsOf = (port: number) =>
  Effect.promise(() => fetch(`http://127.0.0.1:${port}/metrics`).then((response) => response.text()))

const signIn = (port: number, email: string, password: string) =>
  Effect.promise(() =>
    fetch(`http://127.0.0.1:${port}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password })
    }).then(async (response) => ({ status: response.status, body: await response.json() as Record<string, unknown> }))
  )

layer(TestDatabase, { excludeTestServices: true, timeout: "180 seconds" })("on Redis Cluster (D18)", (it) => {
  it.scoped(
    "the API and two workers on three masters: a plain BullMQ producer with {bull}, the sign-in limit, metrics, a SIGKILL",
    () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const cluster = yield* privateRedisCluster
        const environment = {
          DATABASE_URL: Redacted.value(config.databaseUrl),
          REDIS_URL: `redis://127.0.0.1:${cluster.ports[0] ?? 0}`,
          REDIS_CLUSTER_NODES: cluster.nodes,
          REDIS_PREFIX: "account-api",
          SETTLEMENT_QUEUE_PREFIX: "{bull}",
          AUTH_SECRET: "test-secret-that-is-at-least-32-bytes-long",
          LOG_LEVEL: "warning",
          ...QUICK_RECOVERY
        }
        const port = yield* freePort
        const api = yield* startService("api", { ...environment, PORT: String(port) })
        const workers = [yield* startService("worker", environment), yield* startService("worker", environment)]
        yield* readyzAnswers(port, api)

        // A plain BullMQ producer, as the README tells runners on a cluster to write it.
        const queue = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const connection = new Cluster(
              cluster.nodes.split(",").map((node) => {
                const [host = "", nodePort = ""] = node.split(":")
                return { host, port: Number(nodePort) }
              }),
              { redisOptions: { maxRetriesPerRequest: null } }
            )
            connection.on("error", () => {})
            return { connection, queue: new Queue(SETTLEMENT_QUEUE, { connection, prefix: "{bull}" }) }
          }),
          ({ connection, queue }) =>
            Effect.promise(async () => {
              await queue.close()
              await connection.quit().catch(() => "OK")
            })
        ).pipe(Effect.map(({ queue }) => queue))
        yield* waitFor("both workers take jobs", workerCount(queue, 2), { limit: "30 seconds", alive: workers })

        // The sign-in limit: its script takes three counters at once, which must share a slot.
        const user = yield* createUser()
        const failures: Array<number> = []
        for (let attempt = 0; attempt < 5; attempt++) {
          failures.push((yield* signIn(port, user.email, "not the password")).status)
        }
        expect(failures).toEqual([401, 401, 401, 401, 401])
        const limited = yield* signIn(port, user.email, PASSWORD)
        expect(limited.status).toBe(429)
        expect(limited.body).toMatchObject({ code: "rate_limited" })

        // Settlement through the cluster, and the fleet's counters on /metrics.
        const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
        const first = workload(accounts, 300, 20_261_128)
        yield* Effect.promise(() => queue.addBulk([...first]))
        const before = yield* waitFor("the first jobs have finished", allFinished(queue, distinctJobs(first)), {
          limit: "60 seconds",
          every: "250 millis",
          alive: workers
        })
        expect(before.failed).toEqual([])
        expect(new Set(before.completed.map((job) => job.processedBy)).size).toBe(2)
        yield* waitFor(
          `/metrics counts all ${before.completed.length} jobs`,
          Effect.map(
            metricsOf(port),
            (text) => settledTotal(text) === before.completed.length ? Option.some(true) : Option.none()
          ),
          { limit: "30 seconds", every: "500 millis", alive: [api] }
        )
        const metrics = yield* metricsOf(port)
        expect(metrics).toMatch(/^account_api_queue_metrics_available 1$/m)
        expect(metrics).toMatch(/^account_api_queue_jobs\{state="completed"\} \d+$/m)
        expect(metrics).toMatch(/^account_api_dependency_up\{dependency="redis"\} 1$/m)

        // A worker killed while jobs are in flight: the other takes its jobs up again, each applies once.
        const second = workload(accounts, 300, 20_261_129)
        yield* Effect.promise(() => queue.addBulk([...second]))
        const total = distinctJobs(first) + distinctJobs(second)
        yield* waitFor(
          "some of the later jobs are done",
          Effect.map(
            Effect.promise(() => queue.getCompletedCount()),
            (done) => done >= distinctJobs(first) + 50 ? Option.some(done) : Option.none()
          ),
          { limit: "60 seconds", every: "20 millis", alive: workers }
        )
        workers[1]?.kill()
        if (workers[1] !== undefined) {
          expect(yield* exitWithin(workers[1], "10 seconds")).toEqual({ code: null, signal: "SIGKILL" })
        }
        const after = yield* waitFor("every job has finished", allFinished(queue, total), {
          limit: "90 seconds",
          every: "250 millis",
          alive: workers.slice(0, 1)
        })
        expect(after.failed).toEqual([])
        yield* expectBooksMatch(accounts, after.completed, [...first, ...second])
        // The totals never fell: the killed worker's last seconds may be missing, nothing more.
        expect(settledTotal(yield* metricsOf(port))).toBeGreaterThanOrEqual(before.completed.length)
      }),
    170_000
  )
})
