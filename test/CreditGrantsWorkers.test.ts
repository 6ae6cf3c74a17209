import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { DateTime, Effect, Option } from "effect"
import { Books } from "../src/Books.js"
import { AppConfig } from "../src/Config.js"
import * as Money from "../src/Domain/Money.js"
import { SETTLEMENT_JOB_OPTIONS } from "../src/Settlement/Jobs.js"
import { Wallets } from "../src/Wallets.js"
import { serviceEnvironment, settlementQueue, startService, waitFor } from "./support/processes.js"
import { allFinished, workerCount } from "./support/settlementLoad.js"
import { ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D21's expiry under load across processes (docs/decisions/D21-credit-grants.md): two worker
 * processes as `npm start` runs them, a grant expiring between the reserves that earmark it and
 * the spends and releases that follow. Exactly one `credit_expired` entry for its free amount and
 * one per earmark returned to it, whichever process wrote them; the books verify.
 */

const SESSIONS = 30

layer(ProcessTestDatabase(), { excludeTestServices: true, timeout: "240 seconds" })(
  "credit grants across two workers (D21)",
  (it) => {
    describe("a grant expiring mid-load", () => {
      it.scoped("ends once, each returned earmark ends once, and the books verify", () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const sql = yield* SqlClient.SqlClient
          const wallets = yield* Wallets
          const prefix = `${config.redisPrefix}:grants`
          const queue = yield* settlementQueue(config, prefix)
          const workers = yield* Effect.all(
            [
              startService("worker", serviceEnvironment(config, prefix)),
              startService("worker", serviceEnvironment(config, prefix))
            ],
            { concurrency: "unbounded" }
          )
          yield* waitFor("both workers are registered with the queue", workerCount(queue, 2), {
            limit: "60 seconds",
            alive: workers
          })
          const account = yield* newAccount("100")
          const expiresAt = new Date(Date.now() + 8_000)
          const added = yield* wallets.addCredit(account, {
            amount_usd: Money.decimal("20"),
            priority: 0,
            expires_at: DateTime.unsafeMake(expiresAt)
          })
          const grantId = added.grant.id
          let finished = 0
          const run = (jobs: ReadonlyArray<{ readonly name: string; readonly data: Record<string, unknown> }>) =>
            Effect.gen(function*() {
              yield* Effect.promise(() => queue.addBulk(jobs.map((job) => ({ ...job, opts: SETTLEMENT_JOB_OPTIONS }))))
              finished += jobs.length
              const { completed, failed } = yield* waitFor("the jobs have finished", allFinished(queue, finished), {
                limit: "90 seconds",
                every: "200 millis",
                alive: workers
              })
              expect(failed).toEqual([])
              return completed
            })
          const job = (name: string, i: number, extra: Record<string, unknown> = {}) => ({
            name,
            data: { account_id: account.id, session_id: `s-${i}`, idempotency_key: `${name}-${i}`, ...extra }
          })
          const sessions = Array.from({ length: SESSIONS }, (_, i) => i)
          // Before its expiry: 30 holds of 0.50 earmark 15 of it; 5 stay free.
          yield* run(sessions.map((i) => job("reserve", i, { amount_usd: "0.5" })))
          yield* Effect.sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 500)
          // After it: the held sessions spend 0.30 each from their earmarks, and 30 new ones hold on the base.
          const after = yield* run([
            ...sessions.map((i) => job("spend", i, { amount_usd: "0.3" })),
            ...sessions.map((i) => job("reserve", SESSIONS + i, { amount_usd: "0.5" }))
          ])
          expect(new Set(after.map((done) => done.processedBy)).size, "both processes took part").toBe(2)
          yield* run(sessions.map((i) => job("release", i)))

          const ended = yield* sql<{ amount_usd: string; session_id: string | null }>`
            SELECT e.amount_usd::text AS amount_usd, e.session_id FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
            WHERE w.account_id = ${account.id} AND e.kind = 'credit_expired'
              AND e.grants @> ${JSON.stringify([{ grant_id: grantId }])}::jsonb`
          expect(ended.map((row) => row.amount_usd).sort()).toEqual([
            ...Array.from({ length: SESSIONS }, () => "0.200000"),
            "5.000000"
          ])
          const late = yield* sql<{ grants: unknown }>`
            SELECT e.grants FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
            WHERE w.account_id = ${account.id} AND e.kind = 'reserve'
              AND substring(e.session_id FROM 3)::integer >= ${SESSIONS}`
          expect(late).toHaveLength(SESSIONS)
          expect(late.every((row) => row.grants === null), "nothing new earmarks an expired grant").toBe(true)
          const [grant] = yield* sql<{ drawn: string; held: string; ended: string; state: string }>`
            SELECT drawn_usd::text AS drawn, held_usd::text AS held, ended_usd::text AS ended, state::text AS state
            FROM wallet_grants WHERE id = ${grantId}`
          expect(grant).toEqual({ drawn: "9.000000", held: "0.000000", ended: "11.000000", state: "expired" })
          const events = yield* sql<{ type: string }>`
            SELECT type FROM account_events WHERE account_id = ${account.id} AND type = 'grant.expired'`
          expect(events).toHaveLength(1)
          const verdict = yield* Effect.flatMap(Books, (books) => books.verify(Option.some(account.id)))
          expect(verdict.mismatches).toEqual([])
        }).pipe(Effect.provide(Books.Default), Effect.orDie))
    })
  }
)
