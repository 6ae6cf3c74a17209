import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import type { Job, Queue } from "bullmq"
import { Effect, Fiber, Layer, Option, Redacted, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { request } from "node:http"
import { Accounts } from "../src/Accounts.js"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import {
  jobIdOf,
  type ReleasePayload,
  type ReservePayload,
  SETTLEMENT_JOB_OPTIONS,
  type SettlementKind,
  SettlementResult,
  type SpendPayload
} from "../src/Settlement/Jobs.js"
import { DatabaseLive } from "../src/Sql.js"
import { Wallets } from "../src/Wallets.js"
import { privateRedis } from "./support/privateRedis.js"
import { exitWithin, freePort, readyzAnswers, serviceEnvironment, settlementQueue, startService, waitFor } from "./support/processes.js"
import { createUser, PASSWORD, TestConfig } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * The worker and the API as processes of their own, stopped the ways they are
 * stopped in production: SIGTERM for a deploy, SIGKILL for a crash. Each test
 * has its own queue (a Redis prefix under the file's) and its own wallets.
 */

type Payload = ReservePayload | SpendPayload | ReleasePayload

interface Enqueued {
  readonly name: SettlementKind
  readonly data: Payload
  readonly opts: typeof SETTLEMENT_JOB_OPTIONS & { readonly jobId: string }
}

/** A small seeded generator: a workload has the same mix of jobs every run. */
const generator = (seed: number) => {
  let state = seed
  const next = () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  const pick = <A>(items: ReadonlyArray<A>): A => {
    const item = items[int(0, items.length - 1)]
    if (item === undefined) throw new Error("nothing to pick from")
    return item
  }
  return { next, int, pick }
}

/** Whole cents as a wire amount, without a float. */
const cents = (n: number) => `${Math.floor(n / 100)}.${String(n % 100).padStart(2, "0")}`

const enqueued = (name: SettlementKind, data: Payload): Enqueued => ({
  name,
  data,
  opts: { ...SETTLEMENT_JOB_OPTIONS, jobId: jobIdOf(data.account_id, data.idempotency_key) }
})

/**
 * Reserves, spends and releases over ~50 sessions of the given wallets. Every
 * session's first reserve comes first and always fits (a spend for a session
 * whose reserve never applies would wait out all its retries); a few reserves
 * are far beyond any budget. Some jobs are enqueued twice under their own id
 * (BullMQ keeps one), a few again under another id (the database answers
 * duplicate).
 */
const workload = (accounts: ReadonlyArray<Account>, size: number, seed: number) => {
  const random = generator(seed)
  const sessions = Array.from({ length: 50 }, (_, i) => ({ account_id: accounts[i % accounts.length]?.id ?? "", session_id: `session-${i}` }))
  const jobs: Array<Enqueued> = sessions.map((session) =>
    enqueued("reserve", { ...session, amount_usd: cents(random.int(100, 500)), idempotency_key: randomUUID() })
  )
  const unique = size - 50
  while (jobs.length < unique) {
    const session = random.pick(sessions)
    const roll = random.next()
    const idempotency_key = randomUUID()
    if (roll < 0.02) jobs.push(enqueued("reserve", { ...session, amount_usd: "200000", idempotency_key }))
    else if (roll < 0.35) jobs.push(enqueued("reserve", { ...session, amount_usd: cents(random.int(50, 500)), idempotency_key }))
    else if (roll < 0.8) jobs.push(enqueued("spend", { ...session, amount_usd: cents(random.int(1, 300)), idempotency_key }))
    else jobs.push(enqueued("release", { ...session, idempotency_key }))
  }
  const again = Array.from({ length: 30 }, () => random.pick(jobs))
  const underAnotherId = Array.from({ length: 20 }, (_, i) => {
    const job = random.pick(jobs)
    return { ...job, opts: { ...job.opts, jobId: `raw-${i}-${randomUUID()}` } }
  })
  return [...jobs, ...again, ...underAnotherId]
}

const decodeResult = Schema.decodeUnknownSync(SettlementResult)

const keyOf = (data: Payload) => `${data.account_id}/${data.idempotency_key}`

/** The BullMQ jobs `enqueued` became: one per distinct id. */
const distinctJobs = (jobs: ReadonlyArray<Enqueued>) => new Map(jobs.map((job) => [job.opts.jobId, job])).size

const settlementJobsIn = async (queue: Queue, states: ReadonlyArray<"completed" | "failed" | "waiting" | "active" | "delayed">) =>
  (await queue.getJobs([...states], 0, -1)).filter((job) => job.name !== "expire-holds")

/** Every job of ours has finished, completed or failed: answers them. */
const allFinished = (queue: Queue, total: number) =>
  Effect.promise(async () => {
    const counts = await queue.getJobCounts("completed", "failed")
    if ((counts.completed ?? 0) + (counts.failed ?? 0) < total) return Option.none()
    const [completed, failed] = [await settlementJobsIn(queue, ["completed"]), await settlementJobsIn(queue, ["failed"])]
    return completed.length + failed.length >= total ? Option.some({ completed, failed }) : Option.none()
  })

/** The queue has exactly `count` workers taking jobs (their blocking connections, as Redis lists them). */
const workerCount = (queue: Queue, count: number) =>
  Effect.promise(() => queue.getWorkers()).pipe(
    Effect.map((workers) => workers.length === count ? Option.some(count) : Option.none())
  )

interface WalletRow {
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly last_sequence: string
}
interface EntryRow {
  readonly id: string
  readonly sequence: string
  readonly kind: string
  readonly amount_usd: string
  readonly budget_after_usd: string
  readonly reserved_after_usd: string
  readonly spent_after_usd: string
  readonly session_id: string | null
}
interface RecordRow {
  readonly idempotency_key: string
  readonly kind: string
  readonly session_id: string
  readonly outcome: string
  readonly entry_ids: ReadonlyArray<string>
}
interface SessionRow {
  readonly held_usd: string
  readonly spent_usd: string
}

const booksOf = (account: Account) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [wallet] = yield* sql<WalletRow>`
      SELECT budget_usd, reserved_usd, spent_usd, last_sequence::text AS last_sequence FROM wallets WHERE account_id = ${account.id}`
    const entries = yield* sql<EntryRow>`
      SELECT e.id, e.sequence::text AS sequence, e.kind, e.amount_usd, e.budget_after_usd, e.reserved_after_usd,
             e.spent_after_usd, e.session_id
      FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id WHERE w.account_id = ${account.id} ORDER BY e.sequence`
    const records = yield* sql<RecordRow>`
      SELECT r.idempotency_key, r.kind, r.session_id, r.outcome, r.entry_ids::text[] AS entry_ids
      FROM settlement_records r JOIN wallets w ON w.id = r.wallet_id WHERE w.account_id = ${account.id}`
    const sessions = yield* sql<SessionRow>`
      SELECT s.held_usd, s.spent_usd FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
      WHERE w.account_id = ${account.id}`
    if (wallet === undefined) return yield* Effect.dieMessage(`no wallet for ${account.id}`)
    return { wallet, entries, records, sessions }
  }).pipe(Effect.orDie)

const ENTRY_KIND = { reserve: "reserve", spend: "spend", release: "reserve_release" } as const

/**
 * The books equal exactly the jobs that finished, each once: one record per
 * key, whose outcome and entries every job of that key answered; no entry
 * without its record; sequences without gaps; replaying the ledger gives the
 * wallet, and the sessions' holds and spends add up to it.
 */
const expectBooksMatch = (accounts: ReadonlyArray<Account>, finished: ReadonlyArray<Job>, jobs: ReadonlyArray<Enqueued>) =>
  Effect.gen(function*() {
    const payloadByKey = new Map(jobs.map((job) => [keyOf(job.data), job]))
    const resultsByKey = new Map<string, Array<SettlementResult>>()
    for (const job of finished) {
      const key = keyOf(job.data as Payload)
      resultsByKey.set(key, [...(resultsByKey.get(key) ?? []), decodeResult(job.returnvalue)])
    }
    let duplicatesOfWorkDone = 0
    for (const account of accounts) {
      const { entries, records, sessions, wallet } = yield* booksOf(account)
      const z = Money.zero
      // Sequences 1..n without a gap, n the wallet's last; replaying the entries gives its balances.
      expect(entries.map((entry) => Number(entry.sequence))).toEqual(Array.from({ length: entries.length }, (_, i) => i + 1))
      expect(Number(wallet.last_sequence)).toBe(entries.length)
      let [budget, reserved, spent] = [z, z, z]
      for (const entry of entries) {
        const amount = Money.decimal(entry.amount_usd)
        const after = {
          budget: Money.decimal(entry.budget_after_usd),
          reserved: Money.decimal(entry.reserved_after_usd),
          spent: Money.decimal(entry.spent_after_usd)
        }
        switch (entry.kind) {
          case "budget_set":
          case "credit_added":
            budget = budget.plus(amount)
            break
          case "reserve":
            reserved = reserved.plus(amount)
            break
          case "reserve_release":
            reserved = reserved.minus(amount)
            break
          case "spend": {
            const fromHold = reserved.minus(after.reserved)
            expect(fromHold.gte(z) && fromHold.lte(amount)).toBe(true)
            reserved = after.reserved
            spent = spent.plus(amount)
            break
          }
        }
        expect([budget, reserved, spent].map(Money.format)).toEqual([after.budget, after.reserved, after.spent].map(Money.format))
      }
      expect([budget, reserved, spent].map(Money.format)).toEqual([wallet.budget_usd, wallet.reserved_usd, wallet.spent_usd])
      const held = sessions.reduce((sum, s) => sum.plus(Money.decimal(s.held_usd)), z)
      const sessionSpent = sessions.reduce((sum, s) => sum.plus(Money.decimal(s.spent_usd)), z)
      expect([Money.format(held), Money.format(sessionSpent)]).toEqual([wallet.reserved_usd, wallet.spent_usd])

      // One record per key that finished, none for a key that did not.
      const finishedKeys = [...resultsByKey.keys()].filter((key) => key.startsWith(`${account.id}/`)).sort()
      expect(records.map((record) => `${account.id}/${record.idempotency_key}`).sort()).toEqual(finishedKeys)

      // Every session entry belongs to exactly one record, and a record's entries are its job's movement.
      const sessionEntries = new Map(entries.filter((entry) => entry.session_id !== null).map((entry) => [entry.id, entry]))
      const referenced = records.flatMap((record) => record.entry_ids)
      expect(referenced.length).toBe(new Set(referenced).size)
      expect(new Set(referenced)).toEqual(new Set(sessionEntries.keys()))
      for (const record of records) {
        const key = `${account.id}/${record.idempotency_key}`
        const job = payloadByKey.get(key)
        expect(record).toMatchObject({ kind: job?.name, session_id: job?.data.session_id })
        expect(record.entry_ids).toHaveLength(record.outcome === "applied" ? 1 : 0)
        for (const id of record.entry_ids) {
          const entry = sessionEntries.get(id)
          expect(entry).toMatchObject({ kind: job === undefined ? undefined : ENTRY_KIND[job.name], session_id: record.session_id })
          if (job !== undefined && "amount_usd" in job.data) {
            expect(entry?.amount_usd).toBe(Money.format(Money.decimal(job.data.amount_usd)))
          }
        }
        // Every job of the key answered the recorded outcome and entries; at most one of them decided it.
        const results = resultsByKey.get(key) ?? []
        for (const result of results) {
          expect(result.status === "duplicate" ? result.first_status : result.status).toBe(record.outcome)
          expect(result.entry_ids).toEqual(record.entry_ids)
        }
        const deciders = results.filter((result) => result.status !== "duplicate").length
        expect(deciders).toBeLessThanOrEqual(1)
        if (deciders === 0) duplicatesOfWorkDone++
      }
    }
    return { duplicatesOfWorkDone }
  })

const TestProcesses = Layer.mergeAll(Wallets.Default, Accounts.Default).pipe(
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(TestConfig())
)

/** Jobs of a dead worker come back after its lock lapses, at the next stalled check: seconds here, not BullMQ's 30 s. */
const QUICK_RECOVERY = { SETTLEMENT_LOCK_DURATION_MS: "4000", SETTLEMENT_STALLED_INTERVAL_MS: "1000" }

const startWorker = (config: AppConfig, prefix: string, queue: Queue) =>
  Effect.gen(function*() {
    const worker = yield* startService("worker", serviceEnvironment(config, prefix, QUICK_RECOVERY))
    // Ready once its blocking connection is registered with the queue: it is taking jobs.
    yield* waitFor("the worker is registered with the queue", workerCount(queue, 1), { limit: "30 seconds", alive: [worker] })
    return worker
  })

layer(TestProcesses, { excludeTestServices: true, timeout: "90 seconds" })("service processes", (it) => {
  describe("settlement worker", () => {
    it.scoped("killed mid-batch, then replaced: every job applies exactly once", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const prefix = `${config.redisPrefix}:sigkill`
        const queue = yield* settlementQueue(config, prefix)
        const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
        const jobs = workload(accounts, 2000, 20_260_301)
        const total = distinctJobs(jobs)

        const first = yield* startWorker(config, prefix, queue)
        yield* Effect.promise(() => queue.addBulk([...jobs]))
        yield* waitFor(
          "a few hundred jobs have completed",
          Effect.map(Effect.promise(() => queue.getCompletedCount()), (done) => done >= 300 ? Option.some(done) : Option.none()),
          { limit: "30 seconds", every: "20 millis", alive: [first] }
        )
        first.kill()
        yield* exitWithin(first, "10 seconds")
        const atKill = yield* Effect.promise(() => queue.getJobCounts("active", "completed", "waiting"))
        // The worker died with jobs taken and not finished, and others not yet taken.
        expect(atKill.active).toBeGreaterThan(0)
        expect((atKill.completed ?? 0)).toBeLessThan(total)
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

    it.scoped("killed, replaced, and killed again holding the jobs it took up: every job still completes once (D8)", () =>
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
          Effect.map(Effect.promise(() => queue.getCompletedCount()), (done) => done >= 200 ? Option.some(done) : Option.none()),
          { limit: "30 seconds", every: "20 millis", alive: [first] }
        )
        first.kill()
        yield* exitWithin(first, "10 seconds")
        yield* waitFor("the dead worker has left the queue", workerCount(queue, 0), { limit: "10 seconds" })

        // The second worker takes up the first one's jobs; it dies holding some of them.
        const second = yield* startWorker(config, prefix, queue)
        yield* waitFor(
          "the second worker holds jobs it took up after the first died",
          Effect.promise(async () => {
            const active = await queue.getJobs(["active"], 0, -1)
            return active.some((job) => job.stalledCounter > 0) ? Option.some(true) : Option.none()
          }),
          { limit: "30 seconds", every: "10 millis", alive: [second] }
        )
        second.kill()
        yield* exitWithin(second, "10 seconds")
        yield* waitFor("the second worker has left the queue", workerCount(queue, 0), { limit: "10 seconds" })

        const third = yield* startWorker(config, prefix, queue)
        const { completed, failed } = yield* waitFor("every job has finished", allFinished(queue, total), {
          limit: "60 seconds",
          every: "250 millis",
          alive: [third]
        })
        expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
        expect(completed).toHaveLength(total)
        expect(completed.filter((job) => job.stalledCounter > 1).length).toBeGreaterThan(0)
        yield* expectBooksMatch(accounts, completed, jobs)
        third.signal("SIGTERM")
        expect(yield* exitWithin(third, "10 seconds")).toEqual({ code: 0, signal: null })
      }), 150_000)

    it.scoped("Redis restarted under load: no job lost, none applied twice, API and worker reconnect by themselves (D14)", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const dataDir = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-redis-"))),
          (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
        )
        // As the set-up and compose run it: append-only, never evicting.
        const redis = yield* privateRedis(["--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction", "--dir", dataDir])
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
        yield* waitFor("the worker is registered with the queue", workerCount(queue, 1), { limit: "30 seconds", alive: [worker] })

        yield* Effect.promise(() => queue.addBulk([...jobs]))
        yield* waitFor(
          "some jobs have completed",
          Effect.map(Effect.promise(() => queue.getCompletedCount()), (done) => done >= 200 ? Option.some(done) : Option.none()),
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
        expect(failed.map((job) => `${job.name} ${job.id}: ${job.failedReason}`)).toEqual([])
        expect(completed).toHaveLength(total)
        const { duplicatesOfWorkDone } = yield* expectBooksMatch(accounts, completed, jobs)
        yield* Effect.logInfo("after a Redis restart").pipe(
          Effect.annotateLogs({ total, completed: completed.length, failed: failed.length, duplicatesOfWorkDone, recoverySeconds })
        )
        expect(worker.running() && api.running()).toBe(true)
      }), 150_000)

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
    it.scoped("SIGTERM during sign-ins: every request gets a whole response or a refused connection, and it exits 0", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        // Six users, five sign-ins each: attempts in flight count against the sign-in limit (5 per email and address, D2).
        const users = yield* Effect.all(Array.from({ length: 6 }, () => createUser()))
        const port = yield* freePort
        const api = yield* startService("api", serviceEnvironment(config, `${config.redisPrefix}:api`, { PORT: String(port) }))
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
      }), 90_000)
  })
})

type SignInOutcome =
  | { readonly _tag: "Answered"; readonly status: number; readonly body: string }
  | { readonly _tag: "Refused" }
  | { readonly _tag: "Broken"; readonly reason: string }

/**
 * One sign-in on a connection of its own: `sent` once the request is written,
 * or has failed; `outcome` once it is answered. A connection refused is a clean
 * answer from a server that has stopped listening; a reset, a hang-up, a
 * truncated body or no answer within 20 s is not.
 */
const signIn = (port: number, body: string) => {
  let sent: () => void = () => {}
  const written = new Promise<void>((resolve) => {
    sent = resolve
  })
  const outcome = new Promise<SignInOutcome>((resolve) => {
    const req = request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/auth/login",
      agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      timeout: 20_000
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        const expected = Number(response.headers["content-length"] ?? Buffer.byteLength(text))
        resolve(
          response.complete && Buffer.byteLength(text) === expected
            ? { _tag: "Answered", status: response.statusCode ?? 0, body: text }
            : { _tag: "Broken", reason: "truncated response" }
        )
      })
      response.on("error", (error) => resolve({ _tag: "Broken", reason: `response: ${error.message}` }))
    })
    req.on("finish", () => sent())
    req.on("timeout", () => req.destroy(new Error("no answer within 20 s")))
    req.on("error", (error: NodeJS.ErrnoException) => {
      sent()
      resolve(error.code === "ECONNREFUSED" ? { _tag: "Refused" } : { _tag: "Broken", reason: `${error.code ?? ""} ${error.message}` })
    })
    req.end(body)
  })
  return { sent: written, outcome }
}
