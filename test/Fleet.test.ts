import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import * as Money from "../src/Domain/Money.js"
import { EXPIRE_HOLDS, HOUSEKEEPING_QUEUE } from "../src/Settlement/Housekeeping.js"
import { jobIdOf, SETTLEMENT_JOB_OPTIONS } from "../src/Settlement/Jobs.js"
import { Wallets } from "../src/Wallets.js"
import {
  type Child,
  exitWithin,
  freePort,
  type Outcome,
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
  workerCount,
  workload
} from "./support/settlementLoad.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D14: two API processes and two settlement workers, as `npm start` runs
 * them, on one database and one Redis. What holds for one of each holds for
 * the fleet: exactly-once, the sign-in limit, hold expiry, `/metrics`, and a
 * crash or a deploy of one of them losing nothing.
 */

interface Api {
  readonly port: number
  readonly process: Child
}

class Fleet extends Context.Tag("test/Fleet")<Fleet, {
  readonly apis: readonly [Api, Api]
  readonly workers: readonly [Child, Child]
  readonly prefix: string
}>() {}

const startApi = (environment: Record<string, string>) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const api = yield* startService("api", { ...environment, PORT: String(port) })
    yield* readyzAnswers(port, api)
    return { port, process: api } satisfies Api
  })

const FleetLive = Layer.scoped(
  Fleet,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const prefix = `${config.redisPrefix}:fleet`
    const environment = serviceEnvironment(config, prefix, QUICK_RECOVERY)
    const queue = yield* settlementQueue(config, prefix)
    const [apis, workers] = yield* Effect.all([
      Effect.all([startApi(environment), startApi(environment)], { concurrency: "unbounded" }),
      Effect.all([startService("worker", environment), startService("worker", environment)], {
        concurrency: "unbounded"
      })
    ], { concurrency: "unbounded" })
    yield* waitFor("both workers are registered with the queue", workerCount(queue, 2), {
      limit: "30 seconds",
      alive: workers
    })
    return { apis, workers, prefix }
  })
)

const TestFleet = FleetLive.pipe(
  Layer.provideMerge(ProcessTestDatabase())
)

const answered = (outcome: Outcome) => {
  if (outcome._tag !== "Answered") throw new Error(`no answer: ${JSON.stringify(outcome)}`)
  return { status: outcome.status, body: JSON.parse(outcome.body) as Record<string, unknown> }
}

const post = (api: Api, path: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() => send(api.port, { method: "POST", path, body: JSON.stringify(body), headers }).outcome)

const signInOver = (api: Api, email: string, password: string) =>
  Effect.map(post(api, "/auth/login", { email, password }), answered)

/** The sum of a counter's samples in a Prometheus text exposition, those matching `labels`. */
const counterTotal = (exposition: string, name: string, keep: (labels: string) => boolean) =>
  exposition.split("\n")
    .map((line) => line.match(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`)))
    .flatMap((match) => match !== null && keep(match[1] ?? "") ? [Number(match[2])] : [])
    .reduce((sum, value) => sum + value, 0)

const settledJobsOn = (api: Api) =>
  Effect.promise(() => fetch(`http://127.0.0.1:${api.port}/metrics`).then((response) => response.text())).pipe(
    Effect.map((text) =>
      counterTotal(text, "account_api_settlement_jobs_total", (labels) => !labels.includes(`outcome="retry"`))
    )
  )

layer(TestFleet, { excludeTestServices: true, timeout: "90 seconds" })(
  "two APIs and two workers on one database and one Redis (D14)",
  (it) => {
    describe("sign-in limit", () => {
      it.effect("failures split between the two APIs still stop at the limit of five", () =>
        Effect.gen(function*() {
          const { apis: [first, second] } = yield* Fleet
          const user = yield* createUser()
          const statuses: Array<number> = []
          for (let attempt = 0; attempt < 5; attempt++) {
            const api = attempt % 2 === 0 ? first : second
            statuses.push((yield* signInOver(api, user.email, "not the password")).status)
          }
          expect(statuses).toEqual([401, 401, 401, 401, 401])
          // The sixth, on either process and even with the right password, is refused before the password is checked (D2).
          for (const api of [second, first]) {
            const refused = yield* post(api, "/auth/login", { email: user.email, password: PASSWORD })
            expect(refused._tag === "Answered" && refused.status).toBe(429)
            expect(answered(refused).body).toMatchObject({ code: "rate_limited" })
          }
        }))
    })

    describe("hold expiry", () => {
      it.scoped(
        "a hold past its time is released once, however many sweeps both workers run at the same time",
        () =>
          Effect.gen(function*() {
            const { prefix } = yield* Fleet
            const config = yield* AppConfig
            const sql = yield* SqlClient.SqlClient
            const queue = yield* settlementQueue(config, prefix)
            const account = yield* newAccount("100")
            const reserve = {
              account_id: account.id,
              session_id: "expiring",
              amount_usd: "12.50",
              idempotency_key: randomUUID()
            }
            yield* Effect.promise(() =>
              queue.add("reserve", reserve, {
                ...SETTLEMENT_JOB_OPTIONS,
                jobId: jobIdOf(account.id, reserve.idempotency_key)
              })
            )
            yield* waitFor(
              "the hold is recorded",
              Effect.map(
                sql<{ held_usd: string }>`
          SELECT s.held_usd FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
          WHERE w.account_id = ${account.id} AND s.session_id = 'expiring'`,
                (rows) => Option.fromNullable(rows[0])
              ),
              { limit: "30 seconds" }
            )
            // Moves the hold's time into the past, as if its TTL had run out.
            yield* sql`UPDATE settlement_sessions SET expires_at = now() - interval '1 second' WHERE session_id = 'expiring'
          AND wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id})`

            // Runs of the sweep as its scheduler makes them, on its own queue: a dozen at once, for both workers.
            const housekeeping = yield* settlementQueue(config, prefix, HOUSEKEEPING_QUEUE)
            const sweeps = yield* Effect.promise(() =>
              housekeeping.addBulk(Array.from({ length: 12 }, () => ({ name: EXPIRE_HOLDS, data: {} })))
            )
            yield* waitFor(
              "every sweep has run",
              Effect.promise(async () => {
                const states = await Promise.all(sweeps.map((job) => job.getState()))
                return states.every((state) => state === "completed") ? Option.some(states) : Option.none()
              }),
              { limit: "30 seconds" }
            )
            const releases = yield* sql<{ amount_usd: string; note: string }>`
          SELECT e.amount_usd, e.note FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
          WHERE w.account_id = ${account.id} AND e.kind = 'reserve_release'`
            expect(releases).toEqual([{ amount_usd: "12.500000", note: "expired" }])
            const wallets = yield* Wallets
            expect(Money.format((yield* wallets.get(account)).reserved_usd)).toBe("0.000000")
            // The sweeps ran on both workers, not one after the other on a single one.
            const ranOn = new Set(
              (yield* Effect.promise(() => Promise.all(sweeps.map((job) => housekeeping.getJob(job.id ?? ""))))).map((
                job
              ) => job?.processedBy)
            )
            expect(ranOn.size).toBe(2)
          }),
        60_000
      )
    })

    describe("metrics", () => {
      it.scoped("/metrics on either API counts the jobs of both workers", () =>
        Effect.gen(function*() {
          const { apis, prefix } = yield* Fleet
          const queue = yield* settlementQueue(yield* AppConfig, prefix)
          const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
          const jobs = workload(accounts, 400, 20_261_124)
          const earlier = (yield* Effect.promise(() => settlementJobsIn(queue, ["completed", "failed"]))).length
          yield* Effect.promise(() => queue.addBulk([...jobs]))
          const { completed: settled, failed } = yield* waitFor(
            "every job of the fleet's queue has finished",
            allFinished(queue, earlier + distinctJobs(jobs)),
            { limit: "60 seconds", every: "250 millis" }
          )
          expect(failed).toEqual([])
          expect(new Set(settled.map((job) => job.processedBy)).size).toBe(2)
          // Workers publish every few seconds; each API sums what both published.
          for (const api of apis) {
            yield* waitFor(
              `the API on ${api.port} counts all ${settled.length} jobs`,
              Effect.map(settledJobsOn(api), (total) => total === settled.length ? Option.some(total) : Option.none()),
              { limit: "30 seconds", every: "500 millis" }
            )
          }
        }), 90_000)
    })

    describe("a crash and a deploy", () => {
      it.scoped(
        "2,000 jobs with duplicate keys apply once while a worker is killed and an API is stopped under HTTP writes",
        () =>
          Effect.gen(function*() {
            const { apis, prefix, workers } = yield* Fleet
            const [first, second] = apis
            const sql = yield* SqlClient.SqlClient
            const queue = yield* settlementQueue(yield* AppConfig, prefix)
            const hot = yield* newAccount("100000")
            // Half the sessions on one wallet: its jobs contend for one row lock across both workers.
            const accounts = [
              hot,
              hot,
              hot,
              hot,
              yield* newAccount("100000"),
              yield* newAccount("100000"),
              yield* newAccount(),
              yield* newAccount("50")
            ]
            const jobs = workload(accounts, 2000, 20_261_125)
            const total = distinctJobs(jobs)

            const admin = yield* createUser({ admin: true })
            const { body: signedIn } = yield* signInOver(first, admin.email, PASSWORD)
            const headers = { authorization: `Bearer ${String(signedIn.access_token)}` }
            // Clients writing credits through both APIs, as a load balancer spreads them. A connection
            // refused (the API has stopped listening) or a 503 is retried with the same key; anything
            // else is the answer.
            let writing = true
            const writes: Array<{ readonly key: string; readonly status: number }> = []
            const broken: Array<string> = []
            let [refused, reset, unavailable] = [0, 0, 0]
            let stopping = false
            const client = (index: number) =>
              Effect.gen(function*() {
                for (let n = 0; writing; n++) {
                  const key = randomUUID()
                  let api = apis[(index + n) % 2] ?? first
                  for (;;) {
                    const outcome = yield* post(api, "/developer/account/wallet/credits", {
                      amount_usd: "1.00",
                      idempotency_key: key
                    }, headers)
                    if (outcome._tag === "Refused" && api === second) {
                      refused++
                      api = first
                      continue
                    }
                    // A connection the stopping API's kernel had queued but the API never took up is reset when
                    // its listener closes: no answer, nothing done. The key makes sending it again safe (D6).
                    if (
                      outcome._tag === "Broken" && outcome.reason.includes("ECONNRESET") && api === second && stopping
                    ) {
                      reset++
                      api = first
                      continue
                    }
                    if (outcome._tag !== "Answered") {
                      broken.push(`${key}: ${JSON.stringify(outcome)}`)
                      break
                    }
                    if (outcome.status === 503) {
                      unavailable++
                      yield* Effect.sleep("100 millis")
                      continue
                    }
                    writes.push({ key, status: outcome.status })
                    break
                  }
                }
              })
            const clients = yield* Effect.fork(
              Effect.all(Array.from({ length: 8 }, (_, i) => client(i)), { concurrency: "unbounded" })
            )

            const earlier = (yield* Effect.promise(() => settlementJobsIn(queue, ["completed", "failed"]))).length
            yield* Effect.promise(() => queue.addBulk([...jobs]))
            yield* waitFor(
              "a few hundred jobs and some writes are done",
              Effect.map(
                Effect.promise(() => queue.getCompletedCount()),
                (done) => done >= earlier + 600 && writes.length >= 40 ? Option.some(done) : Option.none()
              ),
              { limit: "30 seconds", every: "20 millis", alive: [...workers, first.process, second.process] }
            )
            workers[1].kill()
            stopping = true
            second.process.signal("SIGTERM")
            expect(yield* exitWithin(second.process, "15 seconds")).toEqual({ code: 0, signal: null })
            expect(yield* exitWithin(workers[1], "10 seconds")).toEqual({ code: null, signal: "SIGKILL" })
            const writtenAtStop = writes.length
            yield* waitFor(
              "more writes have gone through the API that is left",
              Effect.sync(() => writes.length >= writtenAtStop + 40 ? Option.some(true) : Option.none()),
              { limit: "30 seconds", alive: [first.process] }
            )
            writing = false
            yield* Fiber.join(clients)

            const { completed, failed } = yield* waitFor(
              "every job has finished",
              allFinished(queue, earlier + total),
              {
                limit: "60 seconds",
                every: "250 millis",
                alive: [workers[0], first.process]
              }
            )
            expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
            const ours = completed.filter((job) =>
              accounts.some((account) => account.id === (job.data as { account_id?: string }).account_id)
            )
            expect(ours).toHaveLength(total)
            const { duplicatesOfWorkDone } = yield* expectBooksMatch([...new Set(accounts)], ours, jobs)

            // Every request the APIs took up was answered once and whole, and each key's credit applied once.
            expect(broken).toEqual([])
            expect(writes.filter((write) => write.status !== 200)).toEqual([])
            const [credits] = yield* sql<{ entries: string; budget: string }>`
          SELECT count(*)::text AS entries, w.budget_usd AS budget FROM wallets w
          JOIN ledger_entries e ON e.wallet_id = w.id AND e.kind = 'credit_added'
          WHERE w.account_id = ${admin.id} GROUP BY w.budget_usd`
            expect(credits).toEqual({ entries: String(writes.length), budget: `${writes.length}.000000` })
            yield* Effect.logInfo("fleet under a crash and a deploy").pipe(Effect.annotateLogs({
              jobs_sent: jobs.length,
              jobs_distinct: total,
              jobs_completed: ours.length,
              jobs_failed: failed.length,
              stalled_and_taken_up: ours.filter((job) => job.stalledCounter > 0).length,
              duplicatesOfWorkDone,
              http_writes: writes.length,
              http_refused_then_sent_elsewhere: refused,
              http_reset_unanswered_then_sent_elsewhere: reset,
              http_503_then_retried: unavailable
            }))
          }),
        150_000
      )
    })
  }
)
