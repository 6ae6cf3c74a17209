import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Fiber, Option } from "effect"
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
import { allFinished, distinctJobs, QUICK_RECOVERY, workerCount, workload } from "./support/settlementLoad.js"
import { ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D14, D18: the fleet's settlement counters on `/metrics` never go down. A
 * worker that stops takes nothing away (Prometheus would read a fall as a
 * reset and count everything again); each worker shows its own process
 * metrics on its metrics port.
 */

const TestDatabase = ProcessTestDatabase()

/** Settlement jobs the fleet finished, retries aside, summed over the series of one scrape. */
const settledTotal = (exposition: string) =>
  exposition.split("\n")
    .map((line) => line.match(/^account_api_settlement_jobs_total\{([^}]*)\} (\S+)$/))
    .flatMap((match) => match !== null && !(match[1] ?? "").includes(`outcome="retry"`) ? [Number(match[2])] : [])
    .reduce((sum, value) => sum + value, 0)

const scrape = (port: number) =>
  Effect.promise(() =>
    fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) }).then((response) => response.text())
  )

/** How long the figures are watched after the worker stopped: beyond a minute, past any snapshot's lifetime. */
const WATCH_AFTER_STOP = Duration.seconds(65)

layer(TestDatabase, { excludeTestServices: true, timeout: "150 seconds" })("fleet counters", (it) => {
  it.scoped(
    "the settled-jobs total on /metrics never falls when a worker stops (SIGTERM), and counts every job",
    () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const prefix = `${config.redisPrefix}:counters`
        const environment = serviceEnvironment(config, prefix, QUICK_RECOVERY)
        const [apiPort, firstMetricsPort, secondMetricsPort] = [yield* freePort, yield* freePort, yield* freePort]
        const api = yield* startService("api", { ...environment, PORT: String(apiPort) })
        const first = yield* startService("worker", {
          ...environment,
          WORKER_METRICS_PORT: String(firstMetricsPort)
        })
        const second = yield* startService("worker", {
          ...environment,
          WORKER_METRICS_PORT: String(secondMetricsPort)
        })
        yield* readyzAnswers(apiPort, api)
        const queue = yield* settlementQueue(config, prefix)
        yield* waitFor("both workers take jobs", workerCount(queue, 2), { limit: "30 seconds", alive: [first, second] })

        const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
        const before = workload(accounts, 300, 20_261_125)
        yield* Effect.promise(() => queue.addBulk([...before]))
        const { completed, failed } = yield* waitFor(
          "the first jobs have finished",
          allFinished(queue, distinctJobs(before)),
          {
            limit: "60 seconds",
            every: "250 millis",
            alive: [first, second]
          }
        )
        expect(failed).toEqual([])
        expect(new Set(completed.map((job) => job.processedBy)).size).toBe(2)
        yield* waitFor(
          `/metrics counts all ${completed.length} jobs`,
          Effect.map(scrape(apiPort), (text) =>
            settledTotal(text) === completed.length ? Option.some(true) : Option.none()),
          { limit: "30 seconds", every: "500 millis", alive: [api] }
        )

        // Each worker shows its own process under prom-client's names, and no settlement counter (the API shows the fleet's).
        for (const port of [firstMetricsPort, secondMetricsPort]) {
          const own = yield* scrape(port)
          expect(own).toMatch(/^process_cpu_seconds_total \d/m)
          expect(own).toMatch(/^nodejs_heap_size_used_bytes \d/m)
          expect(own).not.toContain("account_api_settlement")
        }

        // The figures, read every 250 ms from now on.
        const seen: Array<number> = []
        const watching = yield* Effect.fork(
          Effect.forever(Effect.zipRight(
            Effect.map(scrape(apiPort), (text) =>
              seen.push(settledTotal(text))),
            Effect.sleep("250 millis")
          ))
        )
        yield* waitFor("the watch has its first figure", Effect.sync(() => Option.fromNullable(seen[0])), {
          limit: "10 seconds"
        })
        second.signal("SIGTERM")
        const stoppedAt = Date.now()
        expect(yield* exitWithin(second, "15 seconds")).toEqual({ code: 0, signal: null })

        // The worker left runs more.
        const after = workload(accounts, 120, 20_261_126)
        yield* Effect.promise(() => queue.addBulk([...after]))
        const finished = yield* waitFor(
          "the later jobs have finished",
          allFinished(queue, distinctJobs(before) + distinctJobs(after)),
          { limit: "60 seconds", every: "250 millis", alive: [first] }
        )
        expect(finished.failed).toEqual([])
        const all = finished.completed.length
        yield* waitFor(
          `/metrics counts all ${all} jobs`,
          Effect.map(scrape(apiPort), (text) => settledTotal(text) === all ? Option.some(true) : Option.none()),
          { limit: "30 seconds", every: "500 millis", alive: [api, first] }
        )
        yield* Effect.sleep(
          Duration.millis(Math.max(0, Duration.toMillis(WATCH_AFTER_STOP) - (Date.now() - stoppedAt)))
        )
        yield* Fiber.interrupt(watching)

        expect(seen.length).toBeGreaterThan(100)
        const falls = seen.flatMap((value, i) =>
          i > 0 && value < (seen[i - 1] ?? 0) ? [`${seen[i - 1]} -> ${value}`] : []
        )
        expect(falls).toEqual([])
        expect(seen[0]).toBe(completed.length)
        expect(seen.at(-1)).toBe(all)
      }),
    150_000
  )
})
