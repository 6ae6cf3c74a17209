import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, Runtime } from "effect"
import fc from "fast-check"
import { randomUUID } from "node:crypto"
import { Books } from "../src/Books.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { serveOn } from "../src/Http.js"
import { SETTLEMENT_JOB_OPTIONS, type SettlementKind } from "../src/Settlement/Jobs.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { SpendLimitsRepo } from "../src/SpendControls/LimitsRepo.js"
import { createRepository } from "./support/policies.js"
import { type LimitInput, saveLimits } from "./support/spendControls.js"
import { call, signedInUser } from "./support/TestApp.js"
import { TestSettlement } from "./support/TestSettlement.js"

/**
 * D12–D13 as a property: whatever mix of budget and credit writes over HTTP and
 * reserve, spend, release and extend jobs arrives, with duplicates and retries,
 * `ledger verify` finds the books whole and the sessions view agrees with the wallet.
 * With D16 (docs/decisions/D16-spend-controls.md): sessions attributed to a repository or a
 * user, one capped by `max_usd`, under random limits; no reserve leaves a limit it counts in
 * past its amount, no limit's holds exceed it, and the running totals are the ledger's spends.
 */

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(
  Layer.provideMerge(Layer.mergeAll(Books.Default, SpendLimitsRepo.Default)),
  Layer.provideMerge(TestSettlement())
)

/** The account's limits, each present or not: amounts in cents. */
interface Limits {
  readonly account: number | null
  readonly repository: number | null
  readonly user: number | null
  readonly session: number | null
}

const limitsArbitrary: fc.Arbitrary<Limits> = fc.record({
  account: fc.option(fc.integer({ min: 1, max: 30_000 }), { freq: 2 }),
  repository: fc.option(fc.integer({ min: 1, max: 15_000 }), { freq: 2 }),
  user: fc.option(fc.integer({ min: 1, max: 15_000 }), { freq: 2 }),
  session: fc.option(fc.integer({ min: 1, max: 10_000 }), { freq: 2 })
})

/** Session s-0 is the repository's, s-1 the user's, s-2 capped at this much by its own max_usd. */
const SESSION_CAP = "60.00"

const cents = (n: number) => `${Math.floor(n / 100)}.${String(n % 100).padStart(2, "0")}`

type Command =
  | { readonly kind: "budget"; readonly cents: number }
  | { readonly kind: "credit"; readonly cents: number }
  | { readonly kind: "job"; readonly job: SettlementKind; readonly session: number; readonly cents: number }
  /** The latest job's key again: a raw producer's retry under another BullMQ id (the database answers duplicate). */
  | { readonly kind: "repeat" }
  /** An HTTP write sent again with its key (replayed, or refused as reused). */
  | { readonly kind: "resend" }

const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("budget" as const), cents: fc.integer({ min: 0, max: 50_000 }) })
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("credit" as const), cents: fc.integer({ min: 1, max: 20_000 }) })
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("job" as const),
      job: fc.constantFrom<SettlementKind>("reserve", "reserve", "spend", "spend", "release", "extend"),
      session: fc.integer({ min: 0, max: 2 }),
      cents: fc.integer({ min: 1, max: 8_000 })
    })
  },
  { weight: 1, arbitrary: fc.constant({ kind: "repeat" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "resend" as const }) }
)

interface SessionBody {
  readonly session_id: string
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly state: "open" | "closed"
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly unfunded_usd: string
}

const sum = (values: ReadonlyArray<string>) =>
  Money.format(values.reduce((total, v) => total.plus(Money.decimal(v)), Money.zero))

/** Runs the commands against a fresh account of its own, then checks the books and the view. */
const run = (commands: ReadonlyArray<Command>, limits: Limits) =>
  Effect.gen(function*() {
    const user = yield* signedInUser({ admin: true })
    const account: Account = { kind: "user", id: user.id }
    const repository = yield* createRepository(user.id)
    const saved: Array<LimitInput> = [
      ...(limits.account === null
        ? []
        : [{ scope: "account", scope_id: null, period: "day", amount_usd: cents(limits.account) }] as const),
      ...(limits.repository === null
        ? []
        : [{
          scope: "repository",
          scope_id: repository,
          period: "week",
          amount_usd: cents(limits.repository)
        }] as const),
      ...(limits.user === null
        ? []
        : [{ scope: "user", scope_id: user.id, period: "month", amount_usd: cents(limits.user) }] as const),
      ...(limits.session === null
        ? []
        : [{ scope: "session", scope_id: null, period: "session", amount_usd: cents(limits.session) }] as const)
    ]
    if (saved.length > 0) yield* saveLimits(account, saved)
    const termsOf = (session: number) =>
      session === 0 ? { repository_id: repository } : session === 1 ? { user_id: user.id } : { max_usd: SESSION_CAP }
    const limitsRepo = yield* SpendLimitsRepo
    /** Every period limit that counts the session is within its amount (D16: no overshoot by reservations). */
    const expectWithinLimits = (session: number) =>
      Effect.gen(function*() {
        const [found] = yield* limitsRepo.findUsed([account], new Date())
        for (const limit of found?.limits ?? []) {
          const counts = limit.scope === "account" || (limit.scope === "repository" && session === 0) ||
            (limit.scope === "user" && session === 1)
          if (counts) {
            expect({ limit: limit.scope, within: limit.kind === "spend" && limit.used_usd.lte(limit.amount_usd) })
              .toEqual({
                limit: limit.scope,
                within: true
              })
          }
        }
      })
    // The wallet exists from its first read (D6), whatever the commands do.
    expect((yield* call("GET", "/developer/account/wallet", { token: user.token })).status).toBe(200)
    const producer = yield* SettlementProducer
    const queue = yield* SettlementQueue
    let lastJob: { readonly name: SettlementKind; readonly data: Record<string, unknown> } | undefined
    let lastWrite:
      | { readonly path: string; readonly method: "PUT" | "POST"; readonly body: Record<string, unknown> }
      | undefined
    let version = 0
    const opened = new Set<string>()
    for (const step of commands) {
      switch (step.kind) {
        case "budget":
        case "credit": {
          const write = step.kind === "budget"
            ? {
              method: "PUT" as const,
              path: "/developer/account/wallet",
              body: { budget_usd: cents(step.cents), expected_version: version, idempotency_key: randomUUID() }
            }
            : {
              method: "POST" as const,
              path: "/developer/account/wallet/credits",
              body: { amount_usd: cents(step.cents), idempotency_key: randomUUID() }
            }
          const reply = yield* call(write.method, write.path, { token: user.token, body: write.body })
          // A budget below what is committed is refused (409), and changes nothing.
          expect([200, 409]).toContain(reply.status)
          if (reply.status === 200) version = (reply.body as { version: number }).version
          lastWrite = write
          break
        }
        case "resend": {
          if (lastWrite === undefined) break
          const reply = yield* call(lastWrite.method, lastWrite.path, { token: user.token, body: lastWrite.body })
          expect([200, 409]).toContain(reply.status)
          break
        }
        case "job": {
          const session_id = `s-${step.session}`
          // Jobs of a session no reserve has opened wait out their retries (D8); the property needs none of that wait.
          const job = opened.has(session_id) ? step.job : "reserve"
          const base = { account_id: account.id, session_id, idempotency_key: randomUUID() }
          const enqueued = job === "reserve"
            ? yield* producer.enqueueReserve({ ...base, amount_usd: cents(step.cents), ...termsOf(step.session) })
            : job === "spend"
            ? yield* producer.enqueueSpend({ ...base, amount_usd: cents(step.cents) })
            : job === "release"
            ? yield* producer.enqueueRelease(base)
            : yield* producer.enqueueExtend({ ...base, ttl_seconds: 120 })
          lastJob = { name: job, data: enqueued.job.data as Record<string, unknown> }
          const result = yield* enqueued.result("10 seconds")
          if (job === "reserve" && result.status === "applied") {
            opened.add(session_id)
            yield* expectWithinLimits(step.session)
          }
          // A refusal past a limit names one the reserve would have passed.
          if (result.status === "limit_reached") {
            expect(Number(result.limit?.used_usd) + step.cents / 100).toBeGreaterThan(Number(result.limit?.amount_usd))
          }
          break
        }
        case "repeat": {
          if (lastJob === undefined) break
          const job = lastJob
          yield* Effect.promise(() =>
            queue.add(job.name, job.data, { ...SETTLEMENT_JOB_OPTIONS, jobId: `repeat-${randomUUID()}` })
          )
          break
        }
      }
    }
    // Whatever is still queued settles before the books are read: the queue drains.
    yield* Effect.promise(async () => {
      for (let i = 0; i < 100; i++) {
        const counts = await queue.getJobCounts("waiting", "active")
        if ((counts.waiting ?? 0) + (counts.active ?? 0) === 0) return
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    })

    const verdict = yield* Effect.flatMap(Books, (books) => books.verify(Option.some(account.id)))
    expect(verdict.mismatches).toEqual([])
    const wallet = (yield* call("GET", "/developer/account/wallet", { token: user.token })).body as {
      reserved_usd: string
      spent_usd: string
    }
    const sessions =
      ((yield* call("GET", "/developer/account/wallet/sessions?state=all&limit=500", { token: user.token }))
        .body as { sessions: ReadonlyArray<SessionBody> }).sessions
    expect(sum(sessions.filter((s) => s.state === "open").map((s) => s.reserved_usd))).toBe(wallet.reserved_usd)
    expect(sum(sessions.map((s) => s.reserved_usd))).toBe(wallet.reserved_usd)
    expect(sum(sessions.map((s) => s.spent_usd))).toBe(wallet.spent_usd)

    // No limit's holds exceed it: reservations never pass a limit, only spends beyond their holds can.
    const held = (pick: (session: SessionBody) => boolean) =>
      Money.decimal(sum(sessions.filter((s) => s.state === "open" && pick(s)).map((s) => s.reserved_usd)))
    const within = (limit: number | null, holds: Money.Decimal) => limit === null || holds.lte(limit / 100)
    expect(within(limits.account, held(() => true))).toBe(true)
    expect(within(limits.repository, held((s) => s.repository_id === repository))).toBe(true)
    expect(within(limits.user, held((s) => s.user_id === user.id))).toBe(true)
    for (const session of sessions) {
      // A session's own holds and spends stay under its caps but for spends beyond its hold.
      const capped = Money.decimal(session.reserved_usd).plus(session.spent_usd).minus(session.unfunded_usd)
      if (limits.session !== null) expect(capped.lte(limits.session / 100)).toBe(true)
      if (session.session_id === "s-2") expect(capped.lte(SESSION_CAP)).toBe(true)
    }
    // The spend report's running totals are the ledger's spends.
    const sql = yield* SqlClient.SqlClient
    const [totals] = yield* sql<{ spent: string; unfunded: string; sessions: string }>`
      SELECT coalesce(sum(t.spent_usd), 0)::numeric(18, 6)::text AS spent,
             coalesce(sum(t.unfunded_usd), 0)::numeric(18, 6)::text AS unfunded,
             coalesce(sum(t.sessions), 0)::text AS sessions
      FROM settlement_spend_totals t JOIN wallets w ON w.id = t.wallet_id WHERE w.account_id = ${account.id}`
    expect(totals).toEqual({
      spent: wallet.spent_usd,
      unfunded: sum(sessions.map((s) => s.unfunded_usd)),
      sessions: String(sessions.filter((s) => Money.decimal(s.spent_usd).gt(0)).length)
    })
  }).pipe(Effect.orDie)

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "60 seconds" })(
  "the books, whatever happens (D12, D13)",
  (it) => {
    describe("random writes and jobs, with duplicates and retries", () => {
      it.effect("ledger verify stays green and the sessions view agrees with the wallet", () =>
        Effect.gen(function*() {
          const runtime = yield* Effect.runtime<Effect.Effect.Context<ReturnType<typeof run>>>()
          yield* Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(
                fc.array(command, { minLength: 1, maxLength: 14 }),
                limitsArbitrary,
                (commands, limits) => Runtime.runPromise(runtime)(run(commands, limits))
              ),
              { numRuns: 60 }
            )
          )
        }), 120_000)
    })
  }
)
