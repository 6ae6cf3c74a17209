import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../src/Config.js"
import { Account } from "../src/Domain/Account.js"
import { Events } from "../src/Events.js"
import { Settlement, type SettlementFailure } from "../src/Settlement.js"
import type { SettlementJob, SettlementResult } from "../src/Settlement/Jobs.js"
import { SettlementMetrics } from "../src/Settlement/Metrics.js"
import { SettlementRepo } from "../src/Settlement/Repo.js"
import {
  type BatchState,
  type RecordWrite,
  SettlementTransition,
  type StateSession
} from "../src/Settlement/Transition.js"
import { makeTestLayer } from "./support/makeTestLayer.js"

/**
 * The settlement service with fakes in place of its database (Effect's `makeTestLayer`: a partial
 * fake whose other members die when used): how a batch is split when its transaction fails, and
 * what the service records for the planner's edge cases. No database, no queue: what is tested is
 * the service's own logic, deterministic and fast.
 */

const NOW = new Date("2026-03-01T12:00:00Z")

/** A session as the fake database keeps it: as the transition reads and writes it. */
type StoredSession = Omit<StateSession, "account_id" | "expired">

/** What the fakes saw: each write's records (by key) and whether it committed. */
interface World {
  readonly accounts: ReadonlyArray<Account>
  readonly attempts: Array<{ readonly keys: ReadonlyArray<string>; readonly committed: boolean }>
  /** Sessions and records the fake transition holds, as a database would between batches. */
  readonly sessions: Map<string, StoredSession>
  readonly records: Array<RecordWrite>
}

/**
 * The service over a fake transition. `refuseCommit` says which writes fail (as a database
 * trigger or a lost connection would); `gate` holds the first batch until the test has queued
 * the others. Every account's wallet holds a budget of 100 and has no limits or thresholds.
 */
const settlementWith = (options: {
  readonly world: World
  readonly refuseCommit: (keys: ReadonlyArray<string>) => Error | undefined
  readonly gate: Deferred.Deferred<void>
}) => {
  const { gate, refuseCommit, world } = options
  let reads = 0
  const time = NOW.toISOString()
  const fakes = Layer.mergeAll(
    makeTestLayer(AppConfig)({ reservationTtl: Duration.days(1) }),
    makeTestLayer(SettlementMetrics)({ recordBatch: () => {}, recordJob: () => {}, recordConflicts: () => {} }),
    // Nothing to encode: the batch's events are tested in test/SettlementEvents.test.ts.
    makeTestLayer(Events)({ encode: (event) => ({ type: event.type, data: "{}" }) }),
    makeTestLayer(SettlementTransition)({
      read: (request) =>
        Effect.zipRight(
          reads++ === 0 ? Deferred.await(gate) : Effect.void,
          Effect.succeed<BatchState>({
            time,
            accounts: world.accounts.filter((a) => request.accounts.includes(a.id)).map((a) => ({
              id: a.id,
              kind: a.kind,
              local_day: time.slice(0, 10),
              wallet: {
                id: `wallet-${a.id}`,
                budget_usd: "100.000000",
                reserved_usd: "0.000000",
                spent_usd: "0.000000",
                enforced: true,
                version: 1,
                last_sequence: 0,
                created_at: time,
                updated_at: time,
                xmin: "1"
              }
            })),
            owners: [],
            records: [],
            sessions: request.sessions.flatMap(({ account_id, session_id }) => {
              const session = world.sessions.get(session_id)
              return session === undefined ? [] : [{ ...session, account_id, expired: false }]
            }),
            limits: [],
            thresholds: [],
            grants: []
          })
        ),
      write: (batch) => {
        const keys = batch.records.map((record) => record.idempotency_key)
        const refused = refuseCommit(keys)
        world.attempts.push({ keys, committed: refused === undefined })
        if (refused !== undefined) return Effect.die(refused)
        for (const { wallet_id: _wallet, ...session } of batch.sessions) {
          world.sessions.set(session.session_id, {
            ...session,
            state: session.state === "open" ? "open" : session.state === "released" ? "released" : "expired",
            created_at: time,
            updated_at: time
          })
        }
        world.records.push(...batch.records)
        return Effect.succeed(new Set(batch.wallets.map((wallet) => wallet.id)))
      }
    }),
    makeTestLayer(SettlementRepo)({})
  )
  return Settlement.DefaultWithoutDependencies.pipe(Layer.provide(fakes))
}

const accountsOf = (n: number) => Array.from({ length: n }, () => new Account({ kind: "user", id: randomUUID() }))

const reserve = (account: Account, key: string, amount = "1", session = key): SettlementJob => ({
  kind: "reserve",
  payload: { account_id: account.id, session_id: session, amount_usd: amount, idempotency_key: key }
})
const release = (account: Account, key: string, session: string): SettlementJob => ({
  kind: "release",
  payload: { account_id: account.id, session_id: session, idempotency_key: key }
})
const extend = (account: Account, key: string, session: string): SettlementJob => ({
  kind: "extend",
  payload: { account_id: account.id, session_id: session, idempotency_key: key }
})

type Outcome = Exit.Exit<SettlementResult, SettlementFailure>

/**
 * Offers `first` alone (its batch waits at the gate), then `rest`, which therefore wait together
 * for the next batch; opens the gate and collects every job's outcome.
 */
const inOneBatch = (first: SettlementJob, rest: ReadonlyArray<SettlementJob>, gate: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const settlement = yield* Settlement
    const outcomes = new Map<string, Deferred.Deferred<Outcome>>()
    const offer = (job: SettlementJob) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<Outcome>()
        outcomes.set(job.payload.idempotency_key, done)
        settlement.offer(job, (exit) => Deferred.unsafeDone(done, Effect.succeed(exit)))
      })
    yield* offer(first)
    yield* Effect.forEach(rest, offer)
    yield* Deferred.succeed(gate, undefined)
    const settled = new Map<string, Outcome>()
    for (const [key, done] of outcomes) settled.set(key, yield* Deferred.await(done))
    return settled
  })

const statusOf = (outcome: Outcome | undefined) =>
  outcome !== undefined && Exit.isSuccess(outcome) ? outcome.value.status : undefined
const failureOf = (outcome: Outcome | undefined) =>
  outcome !== undefined && Exit.isFailure(outcome) && outcome.cause._tag === "Fail"
    ? `${outcome.cause.error._tag}: ${outcome.cause.error.message}`
    : undefined

const emptyWorld = (accounts: ReadonlyArray<Account>): World => ({
  accounts,
  attempts: [],
  sessions: new Map(),
  records: []
})

describe("the settlement service over fakes", () => {
  describe("a batch whose transaction fails (D8: one job never harms another)", () => {
    it.effect("is tried again in halves, by wallets, down to the one job at fault; every other job applies", () =>
      Effect.gen(function*() {
        const [head, a, b, doomed, c, d] = accountsOf(6)
        if (head === undefined || a === undefined || b === undefined || doomed === undefined) throw new Error("setup")
        if (c === undefined || d === undefined) throw new Error("setup")
        const world = emptyWorld([head, a, b, doomed, c, d])
        const gate = yield* Deferred.make<void>()
        const layer = settlementWith({
          world,
          gate,
          refuseCommit: (keys) => keys.includes("doomed") ? new Error("commit refused") : undefined
        })
        const outcomes = yield* inOneBatch(
          reserve(head, "head"),
          [reserve(a, "a"), reserve(b, "b"), reserve(doomed, "doomed"), reserve(c, "c"), reserve(d, "d")],
          gate
        ).pipe(Effect.provide(layer), Effect.scoped)

        expect(world.attempts).toEqual([
          { keys: ["head"], committed: true },
          { keys: ["a", "b", "doomed", "c", "d"], committed: false },
          { keys: ["a", "b", "doomed"], committed: false },
          { keys: ["a", "b"], committed: true },
          { keys: ["doomed"], committed: false },
          { keys: ["c", "d"], committed: true }
        ])
        expect(["head", "a", "b", "c", "d"].map((key) => statusOf(outcomes.get(key)))).toEqual(
          Array(5).fill("applied")
        )
        expect(failureOf(outcomes.get("doomed"))).toBe("SettlementDeferred: the wallet could not be settled now")
      }))

    it.effect("of one wallet, is split in its jobs' arrival order, and the jobs after the culprit still apply", () =>
      Effect.gen(function*() {
        const [head, wallet] = accountsOf(2)
        if (head === undefined || wallet === undefined) throw new Error("setup")
        const world = emptyWorld([head, wallet])
        const gate = yield* Deferred.make<void>()
        const layer = settlementWith({
          world,
          gate,
          refuseCommit: (keys) => keys.includes("j2") ? new Error("commit refused") : undefined
        })
        const jobs = ["j0", "j1", "j2", "j3", "j4"].map((key) => reserve(wallet, key))
        const outcomes = yield* inOneBatch(reserve(head, "head"), jobs, gate).pipe(
          Effect.provide(layer),
          Effect.scoped
        )
        expect(world.attempts.slice(1)).toEqual([
          { keys: ["j0", "j1", "j2", "j3", "j4"], committed: false },
          { keys: ["j0", "j1", "j2"], committed: false },
          { keys: ["j0", "j1"], committed: true },
          { keys: ["j2"], committed: false },
          { keys: ["j3", "j4"], committed: true }
        ])
        expect(["j0", "j1", "j3", "j4"].map((key) => statusOf(outcomes.get(key)))).toEqual(Array(4).fill("applied"))
        expect(failureOf(outcomes.get("j2"))).toMatch(/^SettlementDeferred/)
      }))

    it.effect("with the database away, is not split: every job is retried as it is", () =>
      Effect.gen(function*() {
        const [head, a, b, c] = accountsOf(4)
        if (head === undefined || a === undefined || b === undefined || c === undefined) throw new Error("setup")
        const world = emptyWorld([head, a, b, c])
        const gate = yield* Deferred.make<void>()
        const away = new SqlError({ message: "Connection terminated unexpectedly", cause: new Error("terminated") })
        const layer = settlementWith({
          world,
          gate,
          refuseCommit: (keys) => keys.includes("head") ? undefined : away
        })
        const outcomes = yield* inOneBatch(
          reserve(head, "head"),
          [reserve(a, "a"), reserve(b, "b"), reserve(c, "c")],
          gate
        )
          .pipe(Effect.provide(layer), Effect.scoped)
        expect(world.attempts.slice(1)).toEqual([{ keys: ["a", "b", "c"], committed: false }])
        expect(["a", "b", "c"].map((key) => failureOf(outcomes.get(key)))).toEqual(
          Array(3).fill("SettlementDeferred: the wallet could not be settled now")
        )
      }))
  })

  describe("the planner's edge cases, as the service records them (D12)", () => {
    it.effect("a refused first reserve records its session, holding nothing; a release then closes it at once", () =>
      Effect.gen(function*() {
        const [head, runner] = accountsOf(2)
        if (head === undefined || runner === undefined) throw new Error("setup")
        const world = emptyWorld([head, runner])
        const gate = yield* Deferred.make<void>()
        const layer = settlementWith({ world, gate, refuseCommit: () => undefined })
        const outcomes = yield* inOneBatch(reserve(head, "head"), [
          reserve(runner, "too-much", "1000", "s-1"),
          extend(runner, "beat", "s-1"),
          release(runner, "finally", "s-1"),
          extend(runner, "late-beat", "s-1")
        ], gate).pipe(Effect.provide(layer), Effect.scoped)
        expect(["too-much", "beat", "finally", "late-beat"].map((key) => statusOf(outcomes.get(key)))).toEqual([
          "insufficient_funds",
          "applied",
          "nothing_to_release",
          "session_closed"
        ])
        expect(world.sessions.get("s-1")).toMatchObject({ state: "released", held_usd: "0.000000" })
        expect(world.records.map((record) => [record.idempotency_key, record.outcome])).toEqual([
          ["head", "applied"],
          ["too-much", "insufficient_funds"],
          ["beat", "applied"],
          ["finally", "nothing_to_release"],
          ["late-beat", "session_closed"]
        ])
      }))

    it.effect("a reserve on a session closed in an earlier batch answers session_closed, recorded, holding nothing", () =>
      Effect.gen(function*() {
        const [head, runner] = accountsOf(2)
        if (head === undefined || runner === undefined) throw new Error("setup")
        const world = emptyWorld([head, runner])
        world.sessions.set("done", {
          session_id: "done",
          task_id: null,
          held_usd: "0.000000",
          spent_usd: "2.000000",
          unfunded_usd: "0.000000",
          state: "expired",
          expires_at: NOW.toISOString(),
          created_at: NOW.toISOString(),
          updated_at: NOW.toISOString(),
          repository_id: null,
          user_id: null,
          max_usd: null,
          labels: null,
          warned_percent: 0,
          earmarks: null
        })
        const gate = yield* Deferred.make<void>()
        const layer = settlementWith({ world, gate, refuseCommit: () => undefined })
        const outcomes = yield* inOneBatch(reserve(head, "head"), [reserve(runner, "again", "1", "done")], gate).pipe(
          Effect.provide(layer),
          Effect.scoped
        )
        const again = outcomes.get("again")
        expect(statusOf(again)).toBe("session_closed")
        expect(again !== undefined && Exit.isSuccess(again) ? again.value.entry_ids : undefined).toEqual([])
        expect(world.sessions.get("done")).toMatchObject({ state: "expired", held_usd: "0.000000" })
        expect(world.records.find((record) => record.idempotency_key === "again")).toMatchObject({
          outcome: "session_closed",
          entry_ids: []
        })
      }))
  })
})
