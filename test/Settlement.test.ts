import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import type { Queue } from "bullmq"
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { BOOKS_DRIFT_CHECK } from "../src/Books/Drift.js"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { Settlement } from "../src/Settlement.js"
import { EXPIRE_HOLDS, HOUSEKEEPING_QUEUE } from "../src/Settlement/Housekeeping.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { Wallets } from "../src/Wallets.js"
import { settlementQueue } from "./support/processes.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

const key = () => randomUUID()

const walletOf = (account: Account) => Effect.flatMap(Wallets, (wallets) => wallets.get(account))

const ledgerOf = (account: Account) =>
  Effect.flatMap(Wallets, (wallets) => wallets.ledger(account, { before: Option.none(), limit: 500 })).pipe(
    Effect.map((page) => page.entries),
    Effect.orDie
  )

const reserve = (account: Account, session_id: string, amount_usd: string, idempotency_key = key()) =>
  Effect.flatMap(
    SettlementProducer,
    (producer) =>
      Effect.flatMap(
        producer.enqueueReserve({ account_id: account.id, session_id, amount_usd, idempotency_key }),
        (job) => job.result()
      )
  )

const spend = (account: Account, session_id: string, amount_usd: string, idempotency_key = key()) =>
  Effect.flatMap(
    SettlementProducer,
    (producer) =>
      Effect.flatMap(
        producer.enqueueSpend({ account_id: account.id, session_id, amount_usd, idempotency_key }),
        (job) => job.result()
      )
  )

const release = (account: Account, session_id: string, idempotency_key = key()) =>
  Effect.flatMap(
    SettlementProducer,
    (producer) =>
      Effect.flatMap(producer.enqueueRelease({ account_id: account.id, session_id, idempotency_key }), (job) =>
        job.result())
  )

layer(TestSettlement(), { excludeTestServices: true, timeout: "60 seconds" })("settlement", (it) => {
  describe("reserve", () => {
    it.effect("holds funds on a wallet that is not enforced, without touching its version", () =>
      Effect.gen(function*() {
        const account = yield* newAccount()
        const result = yield* reserve(account, "s-1", "2.5")
        expect(result).toMatchObject({
          status: "applied",
          wallet: { reserved_usd: "2.500000", available_usd: "-2.500000", enforced: false, version: 0 }
        })
        expect(result.entry_ids).toHaveLength(1)
        const [entry] = yield* ledgerOf(account)
        expect(entry).toMatchObject({ id: result.entry_ids[0], kind: "reserve", session_id: "s-1" })
        expect(entry === undefined ? undefined : Money.format(entry.amount_usd)).toBe("2.500000")
      }))

    it.effect("on an enforced wallet without enough available, holds nothing and stays refused", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("5")
        const refusedKey = key()
        const refused = yield* reserve(account, "s-1", "6", refusedKey)
        expect(refused).toMatchObject({
          status: "insufficient_funds",
          entry_ids: [],
          wallet: { reserved_usd: "0.000000" }
        })
        expect(yield* ledgerOf(account)).toHaveLength(1)
        // Credit arriving later does not turn the refused key into a success: a new attempt uses a new key.
        const wallets = yield* Wallets
        yield* wallets.addCredit(account, { amount_usd: Money.decimal("10") })
        // A raw job (another BullMQ id) reaches the worker, which answers from the database.
        const queue = yield* SettlementQueue
        const raw = yield* Effect.promise(() =>
          queue.add("reserve", {
            account_id: account.id,
            session_id: "s-1",
            amount_usd: "6",
            idempotency_key: refusedKey
          }, {
            jobId: `raw-${randomUUID()}`
          })
        )
        const repeat = yield* Effect.promise(() => waitFor(raw.id ?? "", queue))
        expect(repeat).toMatchObject({ status: "duplicate", first_status: "insufficient_funds", entry_ids: [] })
        expect((yield* reserve(account, "s-1", "6")).status).toBe("applied")
      }))

    it.effect("a second reserve of a session adds to its hold", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        yield* reserve(account, "s-1", "1")
        const second = yield* reserve(account, "s-1", "2")
        expect(second.wallet).toMatchObject({ reserved_usd: "3.000000", available_usd: "7.000000", version: 1 })
      }))
  })

  describe("spend", () => {
    it.effect("moves the amount from the hold to spent", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        yield* reserve(account, "s-1", "4")
        const result = yield* spend(account, "s-1", "1.25")
        expect(result).toMatchObject({
          status: "applied",
          unfunded_usd: "0.000000",
          wallet: { reserved_usd: "2.750000", spent_usd: "1.250000", available_usd: "6.000000" }
        })
      }))

    it.effect("charges the part beyond the hold directly, and says how much that was", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("3")
        yield* reserve(account, "s-1", "2")
        const result = yield* spend(account, "s-1", "5")
        expect(result).toMatchObject({
          status: "applied",
          unfunded_usd: "3.000000",
          wallet: { reserved_usd: "0.000000", spent_usd: "5.000000", available_usd: "-2.000000" }
        })
      }))

    it.effect("for a session whose reserve is late, waits for it through retries", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        const producer = yield* SettlementProducer
        const early = yield* producer.enqueueSpend({
          account_id: account.id,
          session_id: "late",
          amount_usd: "1",
          idempotency_key: key()
        })
        yield* Effect.sleep("300 millis")
        yield* reserve(account, "late", "2")
        const result = yield* early.result("20 seconds")
        expect(result).toMatchObject({ status: "applied", wallet: { reserved_usd: "1.000000", spent_usd: "1.000000" } })
        expect(early.job.id).toBeDefined()
        const job = yield* Effect.promise(() => producer.queue.getJob(early.job.id ?? ""))
        expect(job?.attemptsMade).toBeGreaterThanOrEqual(1)
      }))
  })

  describe("release", () => {
    it.effect("returns the whole remaining hold, then there is nothing to release", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        yield* reserve(account, "s-1", "4")
        yield* spend(account, "s-1", "1")
        const released = yield* release(account, "s-1")
        expect(released).toMatchObject({
          status: "applied",
          wallet: { reserved_usd: "0.000000", spent_usd: "1.000000", available_usd: "9.000000" }
        })
        const entries = yield* ledgerOf(account)
        expect(entries[0]).toMatchObject({ kind: "reserve_release", id: released.entry_ids[0] })
        expect(entries[0] === undefined ? undefined : Money.format(entries[0].amount_usd)).toBe("3.000000")
        expect(yield* release(account, "s-1")).toMatchObject({ status: "nothing_to_release", entry_ids: [] })
      }))
  })

  describe("exactly once", () => {
    it.effect("the same key enqueued twice applies once", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        const sameKey = key()
        const first = yield* reserve(account, "s-1", "1", sameKey)
        const again = yield* reserve(account, "s-1", "1", sameKey)
        expect(first.status).toBe("applied")
        expect(["applied", "duplicate"]).toContain(again.status)
        expect(again.entry_ids).toEqual(first.entry_ids)
        expect((yield* walletOf(account)).reserved_usd.toString()).toBe("1")
      }))

    it.effect("a raw job with another BullMQ id but a seen key answers duplicate with the first outcome", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        const sameKey = key()
        const first = yield* reserve(account, "s-1", "1", sameKey)
        const queue = yield* SettlementQueue
        const raw = yield* Effect.promise(() =>
          queue.add(
            "reserve",
            { account_id: account.id, session_id: "s-1", amount_usd: "1", idempotency_key: sameKey },
            { jobId: `raw-${randomUUID()}` }
          )
        )
        const result = yield* Effect.promise(() => waitFor(raw.id ?? "", queue))
        expect(result).toMatchObject({ status: "duplicate", first_status: "applied", entry_ids: first.entry_ids })
        expect(yield* ledgerOf(account)).toHaveLength(2)
      }))

    it.effect("200 concurrent reserves on a small enforced budget apply exactly as many as fit", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        const results = yield* Effect.all(
          Array.from({ length: 200 }, (_, i) => reserve(account, `s-${i}`, "0.3")),
          { concurrency: "unbounded" }
        )
        const applied = results.filter((result) => result.status === "applied")
        expect(applied).toHaveLength(33)
        expect(results.filter((result) => result.status === "insufficient_funds")).toHaveLength(167)
        const wallet = yield* walletOf(account)
        expect(Money.format(wallet.reserved_usd)).toBe("9.900000")
        expect(wallet.available_usd.gte(Money.zero)).toBe(true)
        const entries = yield* ledgerOf(account)
        expect(entries.map((entry) => entry.sequence)).toEqual(Array.from({ length: 34 }, (_, i) => 34 - i))
        for (const entry of entries) {
          expect(
            entry.available_after_usd.eq(
              entry.budget_after_usd.minus(entry.reserved_after_usd).minus(entry.spent_after_usd)
            )
          ).toBe(true)
          expect(entry.available_after_usd.gte(Money.zero)).toBe(true)
        }
      }))
  })

  describe("invalid jobs", () => {
    it.effect("fail at once with the reason, applying nothing", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        const queue = yield* SettlementQueue
        const bad = yield* Effect.promise(() =>
          queue.add("reserve", { account_id: account.id, session_id: "s-1", amount_usd: 5, idempotency_key: key() }, {
            attempts: 10
          })
        )
        const failed = yield* Effect.promise(() => waitForFailure(bad.id ?? "", queue))
        expect(failed.attemptsStarted).toBe(1)
        expect(failed.failedReason).toContain("amount_usd")
        const unknownAccount = yield* Effect.promise(() =>
          queue.add("release", { account_id: randomUUID(), session_id: "s-1", idempotency_key: key() }, {
            attempts: 10
          })
        )
        const rejected = yield* Effect.promise(() => waitForFailure(unknownAccount.id ?? "", queue))
        expect(rejected.attemptsStarted).toBe(1)
        expect(rejected.failedReason).toContain("no account")
        expect(yield* ledgerOf(account)).toHaveLength(1)
      }))
  })

  describe("expiry", () => {
    it.scoped("a hold past its time is released once with note expired; a later spend is still booked", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("10")
        yield* reserve(account, "s-exp", "4")
        const settlement = yield* Settlement
        // Sessions in this file expire after a day; age this one instead of waiting.
        yield* ageSessions(account)
        expect(yield* settlement.expireHolds()).toBeGreaterThanOrEqual(1)
        expect(yield* settlement.expireHolds()).toBe(0)
        const [expired] = yield* ledgerOf(account)
        expect(expired).toMatchObject({ kind: "reserve_release", note: "expired", session_id: "s-exp" })
        const late = yield* spend(account, "s-exp", "1")
        expect(late).toMatchObject({
          status: "applied",
          unfunded_usd: "1.000000",
          wallet: { reserved_usd: "0.000000", spent_usd: "1.000000" }
        })
        // The sweep is scheduled on its own queue, not on the settlement queue whose finished jobs it would trim.
        const queue = yield* SettlementQueue
        expect(yield* Effect.promise(() => queue.getJobScheduler(EXPIRE_HOLDS))).toBeUndefined()
        const config = yield* AppConfig
        const housekeeping = yield* settlementQueue(config, config.settlementQueuePrefix, HOUSEKEEPING_QUEUE)
        expect(yield* Effect.promise(() => housekeeping.getJobScheduler(EXPIRE_HOLDS))).toBeDefined()
      }))

    it.scoped("the expiry sweep's runs are trimmed on their own queue, not kept forever: Redis may not evict (D14)", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const housekeeping = yield* settlementQueue(config, config.settlementQueuePrefix, HOUSEKEEPING_QUEUE)
        // The next run waits as a delayed job; BullMQ trims finished runs by the options it carries.
        const runs = yield* Effect.promise(() => housekeeping.getJobs(["delayed", "waiting", "completed"]))
        const sweeps = runs.filter((job) => job.name === EXPIRE_HOLDS)
        expect(sweeps.length).toBeGreaterThan(0)
        // The books drift check (D19) runs beside it, trimmed alike.
        const checks = runs.filter((job) => job.name === BOOKS_DRIFT_CHECK)
        expect(checks.length).toBeGreaterThan(0)
        for (const sweep of [...sweeps, ...checks]) {
          expect(sweep.opts.removeOnComplete).toEqual({ count: 100, age: 86_400 })
          expect(sweep.opts.removeOnFail).toEqual({ count: 100, age: 86_400 })
        }
        // None of them is among the settlement queue's jobs, the ones operators see.
        const queue = yield* SettlementQueue
        const listed = yield* Effect.promise(() => queue.getJobs(["delayed", "waiting", "completed", "failed"]))
        expect(listed.filter((job) => job.name === EXPIRE_HOLDS)).toEqual([])
      }))
  })

  describe("hold heartbeat (D12)", () => {
    it.effect("an extended hold outlives the old expiry; an unextended one expires once; no ledger entry", () =>
      Effect.gen(function*() {
        const settlement = yield* Settlement
        const account = yield* newAccount("100")
        yield* reserve(account, "s-kept", "4")
        yield* reserve(account, "s-lapsed", "6")
        const entriesBefore = (yield* ledgerOf(account)).length
        // Both holds' time has passed; the heartbeat of one arrives before the sweep.
        yield* ageSessions(account)
        const beat = yield* extend(account, "s-kept", { ttl_seconds: 3600 })
        expect(beat).toMatchObject({ status: "applied", entry_ids: [], wallet: { reserved_usd: "10.000000" } })
        const expiresAt = Date.parse(beat.expires_at ?? "")
        expect(expiresAt - Date.now()).toBeGreaterThan(3500 * 1000)
        expect(expiresAt - Date.now()).toBeLessThanOrEqual(3600 * 1000)
        expect(yield* ledgerOf(account)).toHaveLength(entriesBefore)

        yield* settlement.expireHolds()
        yield* settlement.expireHolds()
        const releases = (yield* ledgerOf(account)).filter((entry) => entry.kind === "reserve_release")
        expect(releases.map((entry) => [entry.session_id, entry.note])).toEqual([["s-lapsed", "expired"]])
        expect(yield* walletOf(account)).toMatchObject({ reserved_usd: Money.decimal("4") })
      }))

    it.effect("a duplicate extend is a duplicate, answering the first expiry; a closed session answers session_closed", () =>
      Effect.gen(function*() {
        const account = yield* newAccount("100")
        yield* reserve(account, "s-1", "2")
        const heartbeatKey = key()
        const first = yield* extend(account, "s-1", { idempotency_key: heartbeatKey })
        expect(first.status).toBe("applied")
        // The typed producer's job id makes BullMQ answer a repeat itself; a raw job reaches the database.
        const queue = yield* SettlementQueue
        const raw = yield* Effect.promise(() =>
          queue.add("extend", { account_id: account.id, session_id: "s-1", idempotency_key: heartbeatKey }, {
            jobId: `raw-${randomUUID()}`
          })
        )
        expect(yield* Effect.promise(() => waitFor(raw.id ?? "", queue))).toMatchObject({
          status: "duplicate",
          first_status: "applied",
          expires_at: first.expires_at
        })

        yield* release(account, "s-1")
        expect(yield* extend(account, "s-1")).toMatchObject({ status: "session_closed", entry_ids: [] })
        expect(yield* extend(account, "s-1")).not.toHaveProperty("expires_at")
      }))

    it.effect(
      "an extend for a session not known yet is retried, and applies once its reserve arrives",
      () =>
        Effect.gen(function*() {
          const account = yield* newAccount("100")
          const producer = yield* SettlementProducer
          const early = yield* producer.enqueueExtend({
            account_id: account.id,
            session_id: "s-late",
            idempotency_key: key()
          })
          yield* reserve(account, "s-late", "1")
          expect(yield* early.result()).toMatchObject({ status: "applied" })
          expect(early.job.attemptsMade).toBeGreaterThanOrEqual(0)
        }),
      30_000
    )
  })
})

const extend = (
  account: Account,
  session_id: string,
  options: { readonly idempotency_key?: string; readonly ttl_seconds?: number } = {}
) =>
  Effect.flatMap(SettlementProducer, (producer) =>
    Effect.flatMap(
      producer.enqueueExtend({
        account_id: account.id,
        session_id,
        idempotency_key: options.idempotency_key ?? key(),
        ...(options.ttl_seconds === undefined ? {} : { ttl_seconds: options.ttl_seconds })
      }),
      (job) => job.result()
    ))

const waitFor = async (jobId: string, queue: Queue) => {
  for (let i = 0; i < 200; i++) {
    if ((await queue.getJobState(jobId)) === "completed") {
      const job = await queue.getJob(jobId)
      if (job !== undefined) return job.returnvalue as unknown
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`job ${jobId} did not complete`)
}

const waitForFailure = async (jobId: string, queue: Queue) => {
  for (let i = 0; i < 200; i++) {
    if ((await queue.getJobState(jobId)) === "failed") {
      const job = await queue.getJob(jobId)
      if (job !== undefined) return job
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`job ${jobId} did not fail`)
}

const ageSessions = (account: Account) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE settlement_sessions SET expires_at = now() - interval '1 second'
               WHERE wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id})`
  }).pipe(Effect.orDie)
