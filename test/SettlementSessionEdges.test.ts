import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Queue, QueueEvents } from "bullmq"
import { Effect } from "effect"
import { Redis as IORedis } from "ioredis"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import { Settlement } from "../src/Settlement.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * A session's edges as a runner written with plain BullMQ meets them (D12, as amended): jobs sent
 * with `new Queue("settlement", { connection, prefix })` and BullMQ's defaults, results read
 * through QueueEvents, against the worker. A session id the service has answered for is known,
 * and a closed session stays closed.
 */

interface Result {
  readonly status: string
  readonly first_status?: string
  readonly entry_ids: ReadonlyArray<string>
  readonly wallet: { readonly reserved_usd: string; readonly spent_usd: string }
  readonly expires_at?: string
}

/** A plain BullMQ runner: its own connection, queue and events, as the README shows them. */
const plainRunner = Effect.gen(function*() {
  const config = yield* AppConfig
  const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
  const prefix = config.settlementQueuePrefix
  const connection = new IORedis(url, { maxRetriesPerRequest: null })
  const queue = new Queue("settlement", { connection, prefix })
  const events = new QueueEvents("settlement", { connection: { url }, prefix })
  yield* Effect.addFinalizer(() =>
    Effect.promise(async () => {
      await events.close()
      await queue.close()
      await connection.quit()
    })
  )
  yield* Effect.promise(() => events.waitUntilReady())
  /**
   * Sends a job with BullMQ's defaults and waits for its result, or its failure's reason. The
   * defaults give one attempt: a job the worker defers ("session not known yet") fails at once, so
   * a result here is an answer on the first attempt.
   */
  const send = (name: string, data: Record<string, string | number>) =>
    Effect.promise(async () => {
      const job = await queue.add(name, data)
      try {
        return { result: (await job.waitUntilFinished(events, 20_000)) as Result, failed: undefined }
      } catch (error) {
        return { result: undefined, failed: error instanceof Error ? error.message : String(error) }
      }
    })
  return { send, queue } as const
})

const sessionRow = (accountId: string, sessionId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ state: string; held_usd: string }>`
      SELECT s.state::text AS state, s.held_usd::text AS held_usd
      FROM settlement_sessions s JOIN wallets w ON w.id = s.wallet_id
      WHERE w.account_id = ${accountId} AND s.session_id = ${sessionId}`
    return rows[0]
  }).pipe(Effect.orDie)

layer(TestSettlement(), { excludeTestServices: true, timeout: "60 seconds" })("a session's edges (D12)", (it) => {
  describe("after a reserve refused for insufficient funds", () => {
    it.scoped("release answers nothing_to_release at once and closes the session, without a retry", () =>
      Effect.gen(function*() {
        const runner = yield* plainRunner
        const account = yield* newAccount("1")
        const reserve = yield* runner.send("reserve", {
          account_id: account.id,
          session_id: "refused-run",
          amount_usd: "5",
          idempotency_key: randomUUID()
        })
        expect(reserve.result).toMatchObject({ status: "insufficient_funds", entry_ids: [] })
        // The runner's `finally`: a release with BullMQ's defaults, one attempt.
        const release = yield* runner.send("release", {
          account_id: account.id,
          session_id: "refused-run",
          idempotency_key: randomUUID()
        })
        expect(release.failed).toBeUndefined()
        expect(release.result).toMatchObject({ status: "nothing_to_release", entry_ids: [] })
        expect(yield* sessionRow(account.id, "refused-run")).toEqual({ state: "released", held_usd: "0.000000" })
      }))

    it.scoped("extend answers at once: applied while the session is open, moving nothing; session_closed once closed", () =>
      Effect.gen(function*() {
        const runner = yield* plainRunner
        const account = yield* newAccount("1")
        const job = (name: string, extra: Record<string, string | number> = {}) =>
          runner.send(name, {
            account_id: account.id,
            session_id: "refused-beat",
            idempotency_key: randomUUID(),
            ...extra
          })
        expect((yield* job("reserve", { amount_usd: "5" })).result).toMatchObject({ status: "insufficient_funds" })
        const beat = yield* job("extend", { ttl_seconds: 600 })
        expect(beat.failed).toBeUndefined()
        expect(beat.result).toMatchObject({
          status: "applied",
          entry_ids: [],
          wallet: { reserved_usd: "0.000000", spent_usd: "0.000000" }
        })
        expect(beat.result?.expires_at).toEqual(expect.any(String))
        expect((yield* job("release")).result).toMatchObject({ status: "nothing_to_release" })
        const late = yield* job("extend")
        expect(late.failed).toBeUndefined()
        expect(late.result).toMatchObject({ status: "session_closed", entry_ids: [] })
      }))
  })

  describe("a closed session stays closed", () => {
    it.scoped("a reserve after release answers session_closed and holds nothing; a spend is still booked", () =>
      Effect.gen(function*() {
        const runner = yield* plainRunner
        const account = yield* newAccount("10")
        const job = (name: string, extra: Record<string, string | number> = {}) =>
          runner.send(name, { account_id: account.id, session_id: "done-run", idempotency_key: randomUUID(), ...extra })
        expect((yield* job("reserve", { amount_usd: "2" })).result).toMatchObject({ status: "applied" })
        expect((yield* job("release")).result).toMatchObject({
          status: "applied",
          wallet: { reserved_usd: "0.000000" }
        })
        const again = yield* job("reserve", { amount_usd: "3" })
        expect(again.result).toMatchObject({
          status: "session_closed",
          entry_ids: [],
          wallet: { reserved_usd: "0.000000" }
        })
        expect(yield* sessionRow(account.id, "done-run")).toEqual({ state: "released", held_usd: "0.000000" })
        // The work was done: a late spend is booked, beyond any hold.
        const spend = yield* job("spend", { amount_usd: "1" })
        expect(spend.result).toMatchObject({
          status: "applied",
          wallet: { reserved_usd: "0.000000", spent_usd: "1.000000" }
        })
        expect(spend.result?.entry_ids).toHaveLength(1)
        // Recorded like every outcome: the same key again is a duplicate of session_closed.
        const key = randomUUID()
        const closed = yield* runner.send("reserve", {
          account_id: account.id,
          session_id: "done-run",
          amount_usd: "3",
          idempotency_key: key
        })
        const repeat = yield* runner.send("reserve", {
          account_id: account.id,
          session_id: "done-run",
          amount_usd: "3",
          idempotency_key: key
        })
        expect(closed.result).toMatchObject({ status: "session_closed" })
        expect(repeat.result).toMatchObject({ status: "duplicate", first_status: "session_closed" })
      }))

    it.scoped("a reserve after the hold expired answers session_closed and holds nothing", () =>
      Effect.gen(function*() {
        const runner = yield* plainRunner
        const sql = yield* SqlClient.SqlClient
        const account = yield* newAccount("10")
        const job = (name: string, extra: Record<string, string | number> = {}) =>
          runner.send(name, {
            account_id: account.id,
            session_id: "lapsed-run",
            idempotency_key: randomUUID(),
            ...extra
          })
        expect((yield* job("reserve", { amount_usd: "2" })).result).toMatchObject({ status: "applied" })
        yield* sql`UPDATE settlement_sessions SET expires_at = now() - interval '1 second'
                   WHERE session_id = 'lapsed-run'`.pipe(Effect.orDie)
        expect(yield* Effect.flatMap(Settlement, (settlement) => settlement.expireHolds())).toBeGreaterThanOrEqual(1)
        expect(yield* sessionRow(account.id, "lapsed-run")).toEqual({ state: "expired", held_usd: "0.000000" })
        const again = yield* job("reserve", { amount_usd: "2" })
        expect(again.result).toMatchObject({
          status: "session_closed",
          entry_ids: [],
          wallet: { reserved_usd: "0.000000" }
        })
        expect(yield* sessionRow(account.id, "lapsed-run")).toEqual({ state: "expired", held_usd: "0.000000" })
      }))
  })

  describe("an extend's hold time is part of its key (D8)", () => {
    it.scoped("the same key with another ttl_seconds fails as idempotency_key_reused; with the same, duplicate", () =>
      Effect.gen(function*() {
        const runner = yield* plainRunner
        const account = yield* newAccount("10")
        expect(
          (yield* runner.send("reserve", {
            account_id: account.id,
            session_id: "beat-run",
            amount_usd: "1",
            idempotency_key: randomUUID()
          })).result
        ).toMatchObject({ status: "applied" })
        const beat = (ttl: number) =>
          runner.send("extend", {
            account_id: account.id,
            session_id: "beat-run",
            idempotency_key: "beat-1",
            ttl_seconds: ttl
          })
        const first = yield* beat(600)
        expect(first.result).toMatchObject({ status: "applied" })
        expect((yield* beat(600)).result).toMatchObject({ status: "duplicate", first_status: "applied" })
        const other = yield* beat(900)
        expect(other.result).toBeUndefined()
        expect(other.failed).toMatch(/^idempotency_key_reused: /)
      }))
  })
})
