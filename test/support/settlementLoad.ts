import { SqlClient } from "@effect/sql"
import { expect } from "@effect/vitest"
import type { Job, Queue } from "bullmq"
import { Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { AppConfig } from "../../src/Config.js"
import type { Account } from "../../src/Domain/Account.js"
import * as Money from "../../src/Domain/Money.js"
import {
  jobIdOf,
  type ReleasePayload,
  type ReservePayload,
  SETTLEMENT_JOB_OPTIONS,
  type SettlementKind,
  SettlementResult,
  type SpendPayload
} from "../../src/Settlement/Jobs.js"
import { serviceEnvironment, startService, waitFor } from "./processes.js"

/**
 * Settlement load for the tests that run the service as processes and break
 * what it stands on: a seeded workload of jobs, the queue's view of it, and
 * the check that the books hold exactly the jobs that finished, each once.
 */

export type Payload = ReservePayload | SpendPayload | ReleasePayload

export interface Enqueued {
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
export const cents = (n: number) => `${Math.floor(n / 100)}.${String(n % 100).padStart(2, "0")}`

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
export const workload = (accounts: ReadonlyArray<Account>, size: number, seed: number) => {
  const random = generator(seed)
  const sessions = Array.from(
    { length: 50 },
    (_, i) => ({ account_id: accounts[i % accounts.length]?.id ?? "", session_id: `session-${i}` })
  )
  const jobs: Array<Enqueued> = sessions.map((session) =>
    enqueued("reserve", { ...session, amount_usd: cents(random.int(100, 500)), idempotency_key: randomUUID() })
  )
  const unique = size - 50
  while (jobs.length < unique) {
    const session = random.pick(sessions)
    const roll = random.next()
    const idempotency_key = randomUUID()
    if (roll < 0.02) jobs.push(enqueued("reserve", { ...session, amount_usd: "200000", idempotency_key }))
    else if (roll < 0.35) {
      jobs.push(enqueued("reserve", { ...session, amount_usd: cents(random.int(50, 500)), idempotency_key }))
    } else if (roll < 0.8) {
      jobs.push(enqueued("spend", { ...session, amount_usd: cents(random.int(1, 300)), idempotency_key }))
    } else jobs.push(enqueued("release", { ...session, idempotency_key }))
  }
  const again = Array.from({ length: 30 }, () => random.pick(jobs))
  const underAnotherId = Array.from({ length: 20 }, (_, i) => {
    const job = random.pick(jobs)
    return { ...job, opts: { ...job.opts, jobId: `raw-${i}-${randomUUID()}` } }
  })
  return [...jobs, ...again, ...underAnotherId]
}

const decodeResult = Schema.decodeUnknownSync(SettlementResult)

export const keyOf = (data: Payload) => `${data.account_id}/${data.idempotency_key}`

/** The BullMQ jobs `enqueued` became: one per distinct id. */
export const distinctJobs = (jobs: ReadonlyArray<Enqueued>) => new Map(jobs.map((job) => [job.opts.jobId, job])).size

export const settlementJobsIn = async (
  queue: Queue,
  states: ReadonlyArray<"completed" | "failed" | "waiting" | "active" | "delayed">
) => (await queue.getJobs([...states], 0, -1)).filter((job) => job.name !== "expire-holds")

/** Every job of ours has finished, completed or failed: answers them. */
export const allFinished = (queue: Queue, total: number) =>
  Effect.promise(async () => {
    const counts = await queue.getJobCounts("completed", "failed")
    if ((counts.completed ?? 0) + (counts.failed ?? 0) < total) return Option.none()
    const [completed, failed] = [
      await settlementJobsIn(queue, ["completed"]),
      await settlementJobsIn(queue, ["failed"])
    ]
    return completed.length + failed.length >= total ? Option.some({ completed, failed }) : Option.none()
  })

/** The queue has exactly `count` workers taking jobs (their blocking connections, as Redis lists them). */
export const workerCount = (queue: Queue, count: number) =>
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

const ENTRY_KIND = { reserve: "reserve", spend: "spend", release: "reserve_release", extend: undefined } as const

/**
 * The books equal exactly the jobs that finished, each once: one record per
 * key, whose outcome and entries every job of that key answered; no entry
 * without its record; sequences without gaps; replaying the ledger gives the
 * wallet, and the sessions' holds and spends add up to it.
 */
export const expectBooksMatch = (
  accounts: ReadonlyArray<Account>,
  finished: ReadonlyArray<Job>,
  jobs: ReadonlyArray<Enqueued>
) =>
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
      expect(entries.map((entry) => Number(entry.sequence))).toEqual(
        Array.from({ length: entries.length }, (_, i) => i + 1)
      )
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
        expect([budget, reserved, spent].map(Money.format)).toEqual(
          [after.budget, after.reserved, after.spent].map(Money.format)
        )
      }
      expect([budget, reserved, spent].map(Money.format)).toEqual([
        wallet.budget_usd,
        wallet.reserved_usd,
        wallet.spent_usd
      ])
      const held = sessions.reduce((sum, s) => sum.plus(Money.decimal(s.held_usd)), z)
      const sessionSpent = sessions.reduce((sum, s) => sum.plus(Money.decimal(s.spent_usd)), z)
      expect([Money.format(held), Money.format(sessionSpent)]).toEqual([wallet.reserved_usd, wallet.spent_usd])

      // One record per key that finished, none for a key that did not.
      const finishedKeys = [...resultsByKey.keys()].filter((key) => key.startsWith(`${account.id}/`)).sort()
      expect(records.map((record) => `${account.id}/${record.idempotency_key}`).sort()).toEqual(finishedKeys)

      // Every session entry belongs to exactly one record, and a record's entries are its job's movement.
      const sessionEntries = new Map(
        entries.filter((entry) => entry.session_id !== null).map((entry) => [entry.id, entry])
      )
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
          expect(entry).toMatchObject({
            kind: job === undefined ? undefined : ENTRY_KIND[job.name],
            session_id: record.session_id
          })
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

/** Jobs of a dead worker come back after its lock lapses, at the next stalled check: sooner here than the defaults' 6 s and 2 s. */
export const QUICK_RECOVERY = { SETTLEMENT_LOCK_DURATION_MS: "4000", SETTLEMENT_STALLED_INTERVAL_MS: "1000" }

export const startWorker = (config: AppConfig, prefix: string, queue: Queue) =>
  Effect.gen(function*() {
    const worker = yield* startService("worker", serviceEnvironment(config, prefix, QUICK_RECOVERY))
    // Ready once its blocking connection is registered with the queue: it is taking jobs.
    yield* waitFor("the worker is registered with the queue", workerCount(queue, 1), {
      limit: "30 seconds",
      alive: [worker]
    })
    return worker
  })
