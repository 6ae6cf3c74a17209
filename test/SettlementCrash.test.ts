import { describe, expect, layer } from "@effect/vitest"
import { type Job, QueueEvents } from "bullmq"
import { Effect, Option, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import path from "node:path"
import { pathToFileURL } from "node:url"
import { ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { SETTLEMENT_QUEUE } from "../src/Settlement/Jobs.js"
import {
  type Child,
  exitWithin,
  serviceEnvironment,
  settlementQueue,
  startService,
  waitFor
} from "./support/processes.js"
import {
  allFinished,
  distinctJobs,
  expectBooksMatch,
  settlementJobsIn,
  workerCount,
  workload
} from "./support/settlementLoad.js"
import { ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * A worker that dies (SIGKILL, a crash) leaves the jobs it held active until their lock
 * lapses; the next stalled check of a live worker puts them back. These run two workers with
 * the service's default lock and stalled-check settings (no override), as `npm start` runs
 * them, each with a probe of its event loop: a live worker whose loop were too busy to renew
 * its locks in time would see its own jobs taken from it as stalled and run twice.
 */

const Env = ProcessTestDatabase()

const PROBE = pathToFileURL(path.join(ROOT, "test", "support", "eventLoopProbe.mjs")).href

/** One 250 ms window of a worker's event loop: how late its timers ran, at most and at the 99th percentile. */
interface LoopWindow {
  readonly at: number
  readonly max_ms: number
  readonly p99_ms: number
}

const probeFile = (child: Child) => path.join(tmpdir(), `event-loop-${child.pid}.json`)

/** How late the worker's timers ran between `from` and `to` (epoch ms), from its probe's windows; removed with the scope. */
const loopDelay = (child: Child, from: number, to: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const windows = (existsSync(probeFile(child))
        ? JSON.parse(readFileSync(probeFile(child), "utf8")) as ReadonlyArray<LoopWindow>
        : []).filter((window) => window.at > from && window.at <= to + 250)
      const p99s = windows.map((window) => window.p99_ms).sort((a, b) => a - b)
      return {
        windows: windows.length,
        max_ms: Math.max(0, ...windows.map((window) => window.max_ms)),
        median_window_p99_ms: p99s[Math.floor(p99s.length / 2)] ?? 0
      }
    }),
    () => Effect.sync(() => rmSync(probeFile(child), { force: true }))
  )

/** Two workers with the service's defaults, started as `npm start` runs them, each with the event-loop probe. */
const startWorkers = (config: AppConfig, prefix: string) =>
  Effect.gen(function*() {
    const queue = yield* settlementQueue(config, prefix)
    const environment = serviceEnvironment(config, prefix, { NODE_OPTIONS: `--import=${PROBE}` })
    const workers = yield* Effect.all([startService("worker", environment), startService("worker", environment)], {
      concurrency: "unbounded"
    })
    yield* waitFor("both workers are registered with the queue", workerCount(queue, 2), {
      limit: "30 seconds",
      alive: workers
    })
    return { queue, workers }
  })

/** The jobs BullMQ took up again as stalled, by id, as its `stalled` events tell them. */
const stalledEvents = (config: AppConfig, prefix: string) =>
  Effect.gen(function*() {
    const connection = yield* Effect.acquireRelease(
      Effect.sync(() => new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })),
      (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
    )
    const events = yield* Effect.acquireRelease(
      Effect.sync(() => new QueueEvents(SETTLEMENT_QUEUE, { connection, prefix })),
      (events) => Effect.promise(() => events.close())
    )
    const stalled: Array<string> = []
    events.on("stalled", ({ jobId }) => stalled.push(jobId))
    yield* Effect.promise(() => events.waitUntilReady())
    return stalled
  })

const workerName = (child: Child) => `${hostname()}:${child.pid}`

layer(Env, { excludeTestServices: true, timeout: "180 seconds" })("a settlement worker's crash (D14)", (it) => {
  describe("under full load", () => {
    it.scoped(
      "no live worker's job is taken up as stalled: lock renewal keeps up with a busy event loop",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const prefix = `${config.redisPrefix}:load`
          const stalled = yield* stalledEvents(config, prefix)
          const { queue, workers } = yield* startWorkers(config, prefix)
          const hot = yield* newAccount("1000000")
          const accounts = [hot, hot, hot, yield* newAccount("1000000"), yield* newAccount(), yield* newAccount("50")]
          const jobs = workload(accounts, 12_000, 20_261_201)
          const total = distinctJobs(jobs)

          const started = performance.now()
          const from = Date.now()
          yield* Effect.promise(() => queue.addBulk([...jobs]))
          const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
            limit: "150 seconds",
            every: "500 millis",
            alive: workers
          })
          const seconds = (performance.now() - started) / 1000
          const loops = yield* Effect.all(workers.map((worker) => loopDelay(worker, from, Date.now())))

          yield* Effect.logInfo("two workers at full load").pipe(Effect.annotateLogs({
            jobs: total,
            seconds,
            jobs_per_second: Math.round(total / seconds),
            stalled_events: stalled.length,
            event_loop_delay: JSON.stringify(loops)
          }))
          expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
          expect(completed).toHaveLength(total)
          // Both workers worked, all the way: the load was theirs to share.
          expect(new Set(completed.map((job) => job.processedBy))).toEqual(new Set(workers.map(workerName)))
          // The probe measured both workers through the load.
          for (const loop of loops) expect(loop.windows).toBeGreaterThan(0)
          // Not one job was taken from a live worker as stalled.
          expect(stalled).toEqual([])
          expect(completed.filter((job) => job.stalledCounter > 0).map((job) => job.id)).toEqual([])
          yield* expectBooksMatch(accounts, completed, jobs)
        }),
      180_000
    )
  })

  describe("SIGKILL of one of two workers", () => {
    it.scoped("its jobs are taken up by the other and complete, each applied once", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const prefix = `${config.redisPrefix}:kill`
        const stalled = yield* stalledEvents(config, prefix)
        const { queue, workers } = yield* startWorkers(config, prefix)
        const [survivor, victim] = workers
        // No wallet here runs short: a session's first reserve held up by the crash must still fit when it
        // is taken up again, or the spends of its session would wait for it through all their attempts.
        const hot = yield* newAccount("1000000000")
        const accounts = [hot, hot, yield* newAccount("1000000000"), yield* newAccount()]
        const jobs = workload(accounts, 6_000, 20_261_202)
        const total = distinctJobs(jobs)

        const from = Date.now()
        yield* Effect.promise(() => queue.addBulk([...jobs]))
        // The victim is busy: it holds jobs when it dies.
        yield* waitFor(
          "both workers hold jobs",
          Effect.promise(() => queue.getActive()).pipe(
            Effect.map((active) => {
              const holders = new Set(active.map((job) => job.processedBy))
              return holders.has(workerName(victim)) && holders.has(workerName(survivor))
                ? Option.some(active.length)
                : Option.none()
            })
          ),
          { limit: "30 seconds", every: "20 millis", alive: workers }
        )
        const killedAt = performance.now()
        victim.kill()
        expect(yield* exitWithin(victim, "10 seconds")).toEqual({ code: null, signal: "SIGKILL" })
        // What it held when it died: active, locked by a process that will never renew nor finish them.
        const orphans = (yield* Effect.promise(() => queue.getActive()))
          .filter((job) => job.processedBy === workerName(victim))
          .map((job) => job.id ?? "")
        expect(orphans.length).toBeGreaterThan(0)

        const recovered = yield* waitFor(
          "every job the killed worker held has been taken up by the other",
          Effect.promise(async () => {
            const held = await Promise.all(orphans.map((id) => queue.getJob(id)))
            return held.every((job) => job?.processedBy === workerName(survivor))
              ? Option.some((performance.now() - killedAt) / 1000)
              : Option.none()
          }),
          // A hang guard only: the figure is logged, not asserted.
          { limit: "70 seconds", every: "50 millis", alive: [survivor] }
        )
        const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
          limit: "120 seconds",
          every: "500 millis",
          alive: [survivor]
        })
        const loop = yield* loopDelay(survivor, from, Date.now())
        yield* Effect.logInfo("a worker killed under load").pipe(Effect.annotateLogs({
          jobs: total,
          held_by_the_killed_worker: orphans.length,
          seconds_until_taken_up_again: recovered,
          stalled_events: stalled.length,
          survivor_event_loop_delay: JSON.stringify(loop)
        }))

        expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
        expect(completed).toHaveLength(total)
        const byId = new Map(completed.map((job: Job) => [job.id ?? "", job]))
        for (const id of orphans) {
          expect(byId.get(id)).toMatchObject({ processedBy: workerName(survivor), stalledCounter: 1 })
        }
        // Taken up again: the killed worker's jobs, once each; none of the survivor's.
        expect(new Set(stalled)).toEqual(new Set(orphans))
        expect(stalled).toHaveLength(orphans.length)
        const again = (yield* Effect.promise(() => settlementJobsIn(queue, ["completed"])))
          .filter((job) => job.stalledCounter > 0)
          .map((job) => job.id)
        expect(new Set(again)).toEqual(new Set(orphans))
        // Whatever the killed worker had applied before it died comes back as duplicate: nothing twice.
        yield* expectBooksMatch(accounts, completed, jobs)
        // The survivor, its settlement and housekeeping workers both running, still drains and exits cleanly.
        survivor.signal("SIGTERM")
        expect(yield* exitWithin(survivor, "15 seconds")).toEqual({ code: 0, signal: null })
      }), 180_000)
  })
})
