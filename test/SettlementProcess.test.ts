import { describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { AppConfig } from "../src/Config.js"
import { privateRedis } from "./support/privateRedis.js"
import {
  exitWithin,
  freePort,
  readyzAnswers,
  send,
  serviceEnvironment,
  settlementQueue,
  startService,
  waitFor
} from "./support/processes.js"
import {
  allFinished,
  distinctJobs,
  expectBooksMatch,
  QUICK_RECOVERY,
  settlementJobsIn,
  startWorker,
  workerCount,
  workload
} from "./support/settlementLoad.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * The worker and the API as processes of their own, stopped the ways they are
 * stopped in production: SIGTERM for a deploy, SIGKILL for a crash. Each test
 * has its own queue (a Redis prefix under the file's) and its own wallets.
 */

const TestProcesses = ProcessTestDatabase()

layer(TestProcesses, { excludeTestServices: true, timeout: "90 seconds" })("service processes", (it) => {
  describe("settlement worker", () => {
    it.scoped("killed mid-batch, then replaced: every job applies exactly once", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const prefix = `${config.redisPrefix}:sigkill`
        const queue = yield* settlementQueue(config, prefix)
        const accounts = [
          yield* newAccount("100000"),
          yield* newAccount("100000"),
          yield* newAccount("100000"),
          yield* newAccount()
        ]
        const jobs = workload(accounts, 2000, 20_260_301)
        const total = distinctJobs(jobs)

        const first = yield* startWorker(config, prefix, queue)
        yield* Effect.promise(() => queue.addBulk([...jobs]))
        yield* waitFor(
          "a few hundred jobs have completed",
          Effect.map(Effect.promise(() => queue.getCompletedCount()), (done) =>
            done >= 300 ? Option.some(done) : Option.none()),
          { limit: "30 seconds", every: "20 millis", alive: [first] }
        )
        first.kill()
        yield* exitWithin(first, "10 seconds")
        const atKill = yield* Effect.promise(() =>
          queue.getJobCounts("active", "completed", "waiting")
        )
        // The worker died with jobs taken and not finished, and others not yet taken.
        expect(atKill.active).toBeGreaterThan(0)
        expect(atKill.completed ?? 0).toBeLessThan(total)
        yield* waitFor("the dead worker has left the queue", workerCount(queue, 0), { limit: "10 seconds" })

        const second = yield* startWorker(config, prefix, queue)
        const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
          limit: "45 seconds",
          every: "250 millis",
          alive: [second]
        })
        expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
        expect(completed).toHaveLength(total)
        const stalled = completed.filter((job) => job.stalledCounter > 0)
        // The killed worker's jobs were taken up again through BullMQ's stalled check.
        expect(stalled.length).toBeGreaterThan(0)
        const { duplicatesOfWorkDone } = yield* expectBooksMatch(accounts, completed, jobs)
        yield* Effect.logInfo("after SIGKILL").pipe(
          Effect.annotateLogs({ total, stalled: stalled.length, duplicatesOfWorkDone, active_at_kill: atKill.active })
        )
        second.signal("SIGTERM")
        expect(yield* exitWithin(second, "10 seconds")).toEqual({ code: 0, signal: null })
      }), 120_000)

    it.scoped(
      "killed, replaced, and killed again holding the jobs it took up: every job still completes once (D8)",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const prefix = `${config.redisPrefix}:twice`
          const queue = yield* settlementQueue(config, prefix)
          const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
          const jobs = workload(accounts, 1500, 20_260_303)
          const total = distinctJobs(jobs)

          const first = yield* startWorker(config, prefix, queue)
          yield* Effect.promise(() => queue.addBulk([...jobs]))
          yield* waitFor(
            "some jobs have completed",
            Effect.map(
              Effect.promise(() => queue.getCompletedCount()),
              (done) => done >= 200 ? Option.some(done) : Option.none()
            ),
            { limit: "30 seconds", every: "20 millis", alive: [first] }
          )
          first.kill()
          yield* exitWithin(first, "10 seconds")
          yield* waitFor("the dead worker has left the queue", workerCount(queue, 0), { limit: "10 seconds" })

          // A second worker takes up the first one's jobs and dies holding some of them. It may finish
          // what it holds between being seen holding it and being killed; then another one is started
          // and killed, until a dead worker is found still holding a job taken up again.
          // Active jobs a worker took up after another died (BullMQ counted them stalled once).
          const activeTakenUpAgain = Effect.promise(async () => {
            const active = await queue.getJobs(["active"], 0, -1)
            return active.filter((job) => job.stalledCounter > 0).length
          })
          const killHolding = Effect.gen(function*() {
            const worker = yield* startWorker(config, prefix, queue)
            yield* waitFor(
              "the worker holds jobs it took up after another died",
              Effect.map(activeTakenUpAgain, (held) => held > 0 ? Option.some(held) : Option.none()),
              { limit: "30 seconds", every: "10 millis", alive: [worker] }
            )
            worker.kill()
            yield* exitWithin(worker, "10 seconds")
            yield* waitFor("the killed worker has left the queue", workerCount(queue, 0), { limit: "10 seconds" })
            // No worker is alive: an active job taken up again is one the killed worker held.
            return yield* activeTakenUpAgain
          })
          const held = yield* killHolding.pipe(
            Effect.repeat({ until: (held) => held > 0, times: 4 })
          )
          expect(held).toBeGreaterThan(0)

          const last = yield* startWorker(config, prefix, queue)
          const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
            limit: "60 seconds",
            every: "250 millis",
            alive: [last]
          })
          expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
          expect(completed).toHaveLength(total)
          expect(completed.filter((job) => job.stalledCounter > 1).length).toBeGreaterThan(0)
          yield* expectBooksMatch(accounts, completed, jobs)
          last.signal("SIGTERM")
          expect(yield* exitWithin(last, "10 seconds")).toEqual({ code: 0, signal: null })
        }),
      150_000
    )

    it.scoped(
      "Redis restarted under load: no job lost, none applied twice, API and worker reconnect by themselves (D14)",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const dataDir = yield* Effect.acquireRelease(
            Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-redis-"))),
            (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
          )
          // As the set-up and compose run it: append-only, never evicting.
          const redis = yield* privateRedis([
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--maxmemory-policy",
            "noeviction",
            "--dir",
            dataDir
          ])
          const prefix = `${config.redisPrefix}:restart`
          const onPrivate = { ...config, redisUrl: Redacted.make(redis.url) }
          const queue = yield* settlementQueue(onPrivate, prefix)
          const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
          const jobs = workload(accounts, 1500, 20_260_304)
          const total = distinctJobs(jobs)
          const port = yield* freePort
          const environment = serviceEnvironment(onPrivate, prefix, { ...QUICK_RECOVERY, PORT: String(port) })
          const api = yield* startService("api", environment)
          const worker = yield* startService("worker", environment)
          yield* readyzAnswers(port, api)
          yield* waitFor("the worker is registered with the queue", workerCount(queue, 1), {
            limit: "30 seconds",
            alive: [worker]
          })

          yield* Effect.promise(() => queue.addBulk([...jobs]))
          yield* waitFor(
            "some jobs have completed",
            Effect.map(Effect.promise(() => queue.getCompletedCount()), (done) =>
              done >= 200 ? Option.some(done) : Option.none()),
            { limit: "30 seconds", every: "20 millis", alive: [worker] }
          )
          const restartedAt = performance.now()
          yield* redis.stopWith("SIGTERM")
          yield* readyzAnswers(port, api, 503, "15 seconds")
          yield* Effect.sleep("2 seconds")
          yield* redis.start
          yield* readyzAnswers(port, api)
          const recoverySeconds = (performance.now() - restartedAt) / 1000

          const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
            limit: "60 seconds",
            every: "250 millis",
            alive: [worker, api]
          })
          expect(failed.map((job) =>
            `${job.name} ${job.id}: ${job.failedReason}`
          )).toEqual([])
          expect(completed).toHaveLength(total)
          const { duplicatesOfWorkDone } = yield* expectBooksMatch(accounts, completed, jobs)
          yield* Effect.logInfo("after a Redis restart").pipe(
            Effect.annotateLogs({
              total,
              completed: completed.length,
              failed: failed.length,
              duplicatesOfWorkDone,
              recoverySeconds
            })
          )
          expect(worker.running() && api.running()).toBe(true)
        }),
      150_000
    )

    it.scoped("SIGTERM with jobs in flight: it finishes every job it took and exits 0", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const prefix = `${config.redisPrefix}:sigterm`
        const queue = yield* settlementQueue(config, prefix)
        const accounts = [yield* newAccount("100000"), yield* newAccount()]
        const jobs = workload(accounts, 1500, 20_260_302)
        const total = distinctJobs(jobs)

        const worker = yield* startWorker(config, prefix, queue)
        yield* Effect.promise(() => queue.addBulk([...jobs]))
        yield* waitFor(
          "jobs are in flight",
          Effect.map(
            Effect.promise(() => queue.getJobCounts("active", "completed")),
            (counts) => (counts.completed ?? 0) >= 100 && (counts.active ?? 0) > 0 ? Option.some(counts) : Option.none()
          ),
          { limit: "30 seconds", every: "20 millis", alive: [worker] }
        )
        worker.signal("SIGTERM")
        expect(yield* exitWithin(worker, "10 seconds")).toEqual({ code: 0, signal: null })

        // Nothing is left active (so nothing will be found stalled), and nothing failed.
        const counts = yield* Effect.promise(() => queue.getJobCounts("active", "failed", "completed", "waiting"))
        expect(counts).toMatchObject({ active: 0, failed: 0 })
        expect(counts.completed).toBeLessThan(total)
        // Every job the worker took has completed; those it had not taken were never started.
        const completed = yield* Effect.promise(() => settlementJobsIn(queue, ["completed"]))
        const left = yield* Effect.promise(() => settlementJobsIn(queue, ["waiting", "delayed"]))
        expect(completed.length + left.length).toBe(total)
        // A job left behind was never started, or waits for a retry after an attempt that ended (its session was not known yet).
        const unfinishedAttempts = left.filter((job) => job.attemptsStarted !== job.attemptsMade)
        expect(unfinishedAttempts.map((job) => job.id)).toEqual([])
        // The database holds exactly the completed jobs, each once, and nothing of the others.
        yield* expectBooksMatch(accounts, completed, jobs)
      }), 90_000)
  })

  describe("API", () => {
    it.scoped(
      "SIGTERM during sign-ins: every request gets a whole response or a refused connection, and it exits 0",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          // Six users, five sign-ins each: attempts in flight count against the sign-in limit (5 per email and address, D2).
          const users = yield* Effect.all(Array.from({ length: 6 }, () => createUser()))
          const port = yield* freePort
          const api = yield* startService(
            "api",
            serviceEnvironment(config, `${config.redisPrefix}:api`, { PORT: String(port) })
          )
          yield* readyzAnswers(port, api)

          const bodies = users.map((user) => JSON.stringify({ email: user.email, password: PASSWORD }))
          const signIns = Array.from({ length: 30 }, (_, n) => signIn(port, bodies[n % bodies.length] ?? ""))
          // SIGTERM as soon as every request is on its way: written to a connection the kernel accepted.
          yield* Effect.promise(() => Promise.all(signIns.map((s) => s.sent)))
          api.signal("SIGTERM")
          const exit = yield* Effect.fork(exitWithin(api, "10 seconds"))
          const outcomes = yield* Effect.promise(() => Promise.all(signIns.map((s) => s.outcome)))
          const exited = yield* Fiber.join(exit)

          expect(outcomes.filter((outcome) => outcome._tag === "Broken")).toEqual([])
          for (const outcome of outcomes) {
            if (outcome._tag === "Answered") {
              expect({ status: outcome.status, body: JSON.parse(outcome.body) }).toMatchObject({
                status: 200,
                body: { token_type: "bearer", user: { email: expect.stringMatching(/@example\.com$/) } }
              })
            }
          }
          expect(outcomes.filter((outcome) => outcome._tag === "Answered").length).toBeGreaterThan(0)
          // Once it has gone, a new connection is refused.
          expect(yield* Effect.promise(() => signIn(port, bodies[0] ?? "").outcome)).toEqual({ _tag: "Refused" })
          expect(exited).toEqual({ code: 0, signal: null })
        }),
      90_000
    )
  })
})

const signIn = (port: number, body: string) => send(port, { method: "POST", path: "/auth/login", body })
