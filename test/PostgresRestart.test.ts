import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import { privatePostgres } from "./support/privatePostgres.js"
import {
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
  workerCount,
  workload
} from "./support/settlementLoad.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D14: the API and the worker on a PostgreSQL server that crashes under
 * settlement and HTTP writes, and comes back. The server is the test's own;
 * the machine's shared one is never touched.
 */

class PrivatePostgres extends Context.Tag("test/PrivatePostgres")<
  PrivatePostgres,
  Effect.Effect.Success<ReturnType<typeof privatePostgres>>
>() {}

const OnPrivatePostgres = Layer.unwrapScoped(
  Effect.map(
    privatePostgres("account_api"),
    (server) =>
      ProcessTestDatabase({ DATABASE_URL: server.url }).pipe(Layer.merge(Layer.succeed(PrivatePostgres, server)))
  )
)

layer(OnPrivatePostgres, { excludeTestServices: true, timeout: "90 seconds" })("PostgreSQL restarted (D14)", (it) => {
  describe("under settlement jobs and HTTP writes", () => {
    it.scoped(
      "every job applies once, every write applies once (503 then the same key again), and both processes recover by themselves",
      () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const server = yield* PrivatePostgres
          const sql = yield* SqlClient.SqlClient
          const prefix = `${config.redisPrefix}:pg`
          const queue = yield* settlementQueue(config, prefix)
          const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
          const jobs = workload(accounts, 1500, 20_261_126)
          const total = distinctJobs(jobs)

          const port = yield* freePort
          const environment = serviceEnvironment(config, prefix, { ...QUICK_RECOVERY, PORT: String(port) })
          const api = yield* startService("api", environment)
          const worker = yield* startService("worker", environment)
          yield* readyzAnswers(port, api)
          yield* waitFor("the worker is registered with the queue", workerCount(queue, 1), {
            limit: "30 seconds",
            alive: [worker]
          })

          const admin = yield* createUser({ admin: true })
          const login = yield* Effect.promise(() =>
            send(port, {
              method: "POST",
              path: "/auth/login",
              body: JSON.stringify({ email: admin.email, password: PASSWORD })
            }).outcome
          )
          const token = login._tag === "Answered"
            ? String((JSON.parse(login.body) as { access_token?: unknown }).access_token)
            : ""
          // Clients adding credit, each key until it is answered 200: a 503 is retried with the same key (D6).
          let writing = true
          const written: Array<string> = []
          const unexpected: Array<string> = []
          let unavailable = 0
          const client = Effect.gen(function*() {
            while (writing) {
              const key = randomUUID()
              for (;;) {
                const outcome = yield* Effect.promise(() =>
                  send(port, {
                    method: "POST",
                    path: "/developer/account/wallet/credits",
                    body: JSON.stringify({ amount_usd: "1.00", idempotency_key: key }),
                    headers: { authorization: `Bearer ${token}` }
                  }).outcome
                )
                if (outcome._tag === "Answered" && outcome.status === 503) {
                  expect(JSON.parse(outcome.body)).toMatchObject({ code: "unavailable" })
                  unavailable++
                  yield* Effect.sleep("200 millis")
                  continue
                }
                if (outcome._tag === "Answered" && outcome.status === 200) written.push(key)
                else unexpected.push(`${key}: ${JSON.stringify(outcome)}`)
                break
              }
            }
          })
          const clients = yield* Effect.fork(
            Effect.all(Array.from({ length: 4 }, () => client), { concurrency: "unbounded" })
          )

          yield* Effect.promise(() => queue.addBulk([...jobs]))
          yield* waitFor(
            "some jobs and writes are done",
            Effect.map(
              Effect.promise(() => queue.getCompletedCount()),
              (done) => done >= 200 && written.length >= 20 ? Option.some(done) : Option.none()
            ),
            { limit: "30 seconds", every: "20 millis", alive: [api, worker] }
          )
          // A crash: no checkpoint, every connection cut; the next start recovers from the WAL.
          const crashedAt = performance.now()
          const completedAtCrash = yield* Effect.promise(() => queue.getCompletedCount())
          yield* server.stopImmediately
          yield* readyzAnswers(port, api, 503, "15 seconds")
          yield* Effect.sleep("2 seconds")
          yield* server.start
          yield* readyzAnswers(port, api, 200, "30 seconds")
          const recoverySeconds = (performance.now() - crashedAt) / 1000
          const writtenAtRecovery = written.length
          yield* waitFor(
            "writes go through again",
            Effect.sync(() => written.length >= writtenAtRecovery + 20 ? Option.some(true) : Option.none()),
            { limit: "30 seconds", alive: [api] }
          )
          writing = false
          yield* Fiber.join(clients)

          const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
            limit: "90 seconds",
            every: "250 millis",
            alive: [api, worker]
          })
          expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
          expect(completed).toHaveLength(total)
          const { duplicatesOfWorkDone } = yield* expectBooksMatch(accounts, completed, jobs)

          expect(unexpected, api.output().split("\n").filter((line) => /error/i.test(line)).slice(0, 5).join("\n"))
            .toEqual([])
          const [credits] = yield* sql<{ entries: string; budget: string }>`
          SELECT count(*)::text AS entries, w.budget_usd AS budget FROM wallets w
          JOIN ledger_entries e ON e.wallet_id = w.id AND e.kind = 'credit_added'
          WHERE w.account_id = ${admin.id} GROUP BY w.budget_usd`
          expect(credits).toEqual({ entries: String(written.length), budget: `${written.length}.000000` })
          // The same processes throughout: they reconnected by themselves.
          expect(api.running() && worker.running()).toBe(true)
          yield* Effect.logInfo("after a PostgreSQL crash").pipe(Effect.annotateLogs({
            jobs_sent: jobs.length,
            jobs_distinct: total,
            jobs_completed: completed.length,
            jobs_completed_at_crash: completedAtCrash,
            jobs_failed: failed.length,
            retried_jobs: completed.filter((job) => job.attemptsMade > 1).length,
            duplicatesOfWorkDone,
            http_writes: written.length,
            http_503_then_retried: unavailable,
            recoverySeconds
          }))
        }),
      180_000
    )
  })
})
