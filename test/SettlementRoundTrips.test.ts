import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { Credentials } from "../src/Auth/Credentials.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { Events } from "../src/Events.js"
import { Settlement } from "../src/Settlement.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { SettlementMetrics } from "../src/Settlement/Metrics.js"
import { DatabaseLive } from "../src/Sql.js"
import { Wallets } from "../src/Wallets.js"
import { type CountingProxy, countingProxy } from "./support/countingProxy.js"
import { saveLimits, saveZone } from "./support/spendControls.js"
import { TestConfig, TestDatabaseUrl } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * A settlement batch costs two round trips to PostgreSQL (docs/architecture.md, "The settlement
 * transition"), whatever rules are on: its state read and its write, no BEGIN, no lock statement,
 * no COMMIT. Counted on the wire, by a proxy between the service's pool and the database; the
 * migrations and the listener go to the database directly and are not counted.
 */
class Wire extends Effect.Tag("test/Wire")<Wire, CountingProxy>() {}

const Counted = Layer.unwrapScoped(Effect.gen(function*() {
  const direct = new URL(yield* TestDatabaseUrl)
  const proxy = yield* countingProxy({ host: direct.hostname, port: Number(direct.port || 5432) })
  const proxied = new URL(direct)
  proxied.host = `127.0.0.1:${proxy.port}`
  return Layer.mergeAll(
    Settlement.Default,
    SettlementMetrics.Default,
    Wallets.Default,
    Accounts.Default,
    Credentials.Default,
    Events.Default
  ).pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(TestConfig({ DATABASE_URL: proxied.toString(), DATABASE_DIRECT_URL: direct.toString() })),
    Layer.merge(Layer.succeed(Wire, proxy))
  )
}))

const isRead = (text: string) => text.includes("limit_use(") && text.includes("settlement_records")
const isWrite = (text: string) => text.includes("INSERT INTO ledger_entries") && text.includes("xmin")

/** The round trips `effect` made, by what they were. */
const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const wire = yield* Wire
    const from = wire.roundTrips.length
    const value = yield* effect
    const trips = wire.roundTrips.slice(from)
    return {
      value,
      reads: trips.filter(isRead).length,
      writes: trips.filter(isWrite).length,
      others: trips.filter((text) => !isRead(text) && !isWrite(text))
    }
  })

/** An account with every rule of the batch on: limits on the account and a repository, an alert threshold. */
const governed = Effect.gen(function*() {
  const account = yield* newAccount("1000")
  const repository = yield* Effect.orDie((yield* Accounts).createRepository(account.id, "agents"))
  yield* saveLimits(account, [
    { scope: "account", scope_id: null, period: "day", amount_usd: "600" },
    { scope: "repository", scope_id: repository.id, period: "day", amount_usd: "500" },
    { scope: "session", scope_id: null, period: "session", amount_usd: "300" },
    // D22's: a member's own, by the hour and over a rolling window, in a zone that is not UTC.
    { scope: "each_repository", scope_id: null, period: "day", amount_usd: "550" },
    { scope: "account", scope_id: null, period: "hour", amount_usd: "700" },
    { scope: "account", scope_id: null, period: "rolling", window_minutes: 60, amount_usd: "800" }
  ])
  yield* saveZone(account, "Asia/Kolkata")
  yield* Effect.orDie((yield* Events).replaceAlerts(account, [{ amount_usd: Money.decimal("950") }], 0))
  return { account, repository: repository.id }
})

const job = (account: Account, kind: "reserve" | "spend" | "release" | "extend", session: string, extra: object = {}) =>
  ({
    kind,
    payload: {
      account_id: account.id,
      session_id: session,
      idempotency_key: randomUUID(),
      ...(kind === "reserve" || kind === "spend" ? { amount_usd: "60" } : {}),
      ...extra
    }
  }) as SettlementJob

layer(Counted, { excludeTestServices: true, timeout: "60 seconds" })("settlement round trips", (it) => {
  describe("a batch is two round trips, with limits, alerts and events on", () => {
    it.effect("each job alone: one read and one write, nothing else", () =>
      Effect.gen(function*() {
        const settlement = yield* Settlement
        const { account, repository } = yield* governed
        const jobs = [
          job(account, "reserve", "s-1", { repository_id: repository, max_usd: "200" }),
          job(account, "spend", "s-1"),
          job(account, "extend", "s-1"),
          job(account, "spend", "s-1", { amount_usd: "150" }),
          job(account, "release", "s-1"),
          job(account, "reserve", "s-2", { repository_id: repository, amount_usd: "295" })
        ]
        const { others, reads, value, writes } = yield* counted(Effect.forEach(jobs, (one) => settlement.apply(one)))
        expect(value.map((result) => result.status)).toEqual([
          "applied",
          "applied",
          "applied",
          "applied",
          "nothing_to_release",
          "limit_reached"
        ])
        expect({ reads, writes, others }).toEqual({ reads: jobs.length, writes: jobs.length, others: [] })
        // The rules were on: the threshold crossed, the session's cap reached and the session closed, the
        // repository's limit reached (its 500 past by the 210 spent and the 295 asked).
        const sql = yield* SqlClient.SqlClient
        const types = yield* sql<{ type: string }>`
          SELECT type FROM account_events WHERE account_id = ${account.id} ORDER BY position`
        expect(types.map((row) => row.type)).toEqual(
          expect.arrayContaining(["wallet.balance_low", "session.cap_reached", "session.closed", "limit.reached"])
        )
      }))

    it.effect("jobs of many wallets together: two round trips a batch, fewer batches than jobs", () =>
      Effect.gen(function*() {
        const settlement = yield* Settlement
        const accounts = yield* Effect.forEach([1, 2, 3, 4], () => governed)
        const jobs = accounts.flatMap(({ account, repository }) =>
          Array.from(
            { length: 10 },
            (_, i) => job(account, "reserve", `s-${i}`, { repository_id: repository, amount_usd: "1" })
          )
        )
        const { others, reads, value, writes } = yield* counted(
          Effect.forEach(jobs, (one) => settlement.apply(one), { concurrency: "unbounded" })
        )
        expect(value.every((result) => result.status === "applied")).toBe(true)
        expect(others).toEqual([])
        expect(writes).toBe(reads)
        expect(reads).toBeLessThan(jobs.length / 4)
      }))
  })

  describe("plans made once", () => {
    it.effect("each statement is parsed once on a connection, then bound by name", () =>
      Effect.gen(function*() {
        const settlement = yield* Settlement
        const { account, repository } = yield* governed
        const wire = yield* Wire
        // Jobs one after another: the pool hands back the connection the last one used.
        const jobs = Array.from(
          { length: 20 },
          (_, i) => job(account, "reserve", `p-${i}`, { repository_id: repository, amount_usd: "1" })
        )
        const fromTrips = wire.roundTrips.length
        const fromParses = wire.parses.length
        const { reads, writes } = yield* counted(Effect.forEach(jobs, (one) => settlement.apply(one)))
        const parses = wire.parses.slice(fromParses)
        expect(wire.roundTrips.length - fromTrips).toBe(reads + writes)
        expect({ reads, writes }).toEqual({ reads: 20, writes: 20 })
        // At most once per connection the batches went out on (the pool keeps up to its size).
        expect(parses.filter(isRead).length).toBeLessThanOrEqual(2)
        expect(parses.filter(isWrite).length).toBeLessThanOrEqual(2)
      }))
  })

  describe("a batch costs the same however many accounts the database holds", () => {
    it.effect(
      "beside 100,000 other accounts with wallets, sessions and history, neither statement's generic plan reads a growing table whole",
      () =>
        Effect.gen(function*() {
          const settlement = yield* Settlement
          const sql = yield* SqlClient.SqlClient
          const { account, repository } = yield* governed
          const wire = yield* Wire
          const from = wire.roundTrips.length
          yield* settlement.apply(job(account, "reserve", "probe", { repository_id: repository, amount_usd: "1" }))
          yield* settlement.apply(job(account, "spend", "probe", { amount_usd: "2" }))
          const trips = wire.roundTrips.slice(from)
          const read = trips.find(isRead)
          const write = trips.find(isWrite)
          expect([read !== undefined, write !== undefined]).toEqual([true, true])
          // 100,000 accounts of their own, each with a wallet, two entries, a session, a key's
          // record and a day's running total (and so the counters of its scope keys).
          yield* sql`
            INSERT INTO users (id, email, name, password_hash)
            SELECT gen_random_uuid(), 'bulk-' || n || '@example.com', 'Bulk', 'x' FROM generate_series(1, 100000) n`
          yield* sql`
            INSERT INTO wallets (account_kind, account_id, budget_usd, reserved_usd, last_sequence)
            SELECT 'user'::account_kind, u.id, 10, 1, 2 FROM users u WHERE u.email LIKE 'bulk-%'`
          yield* sql`
            INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
              spent_after_usd, available_after_usd, session_id)
            SELECT w.id, 1, 'budget_set'::ledger_entry_kind, 10, 10, 0, 0, 10, NULL FROM wallets w WHERE w.budget_usd = 10 AND w.last_sequence = 2
            UNION ALL
            SELECT w.id, 2, 'reserve'::ledger_entry_kind, 1, 10, 1, 0, 9, 's' FROM wallets w WHERE w.budget_usd = 10 AND w.last_sequence = 2`
          yield* sql`
            INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, state, expires_at)
            SELECT w.id, 's', 1, 0, 'open'::settlement_session_state, now() + interval '1 day' FROM wallets w
            WHERE w.budget_usd = 10 AND w.last_sequence = 2`
          yield* sql`
            INSERT INTO settlement_records (wallet_id, idempotency_key, kind, session_id, outcome)
            SELECT w.id, 'k', 'reserve', 's', 'applied'::settlement_outcome FROM wallets w WHERE w.budget_usd = 10 AND w.last_sequence = 2`
          yield* sql`
            INSERT INTO settlement_spend_totals (wallet_id, day, spent_usd, sessions)
            SELECT w.id, '2026-01-01', 1, 1 FROM wallets w WHERE w.budget_usd = 10 AND w.last_sequence = 2`
          // And what each spent in the last hour by the minute and the quarter hour (D22), and a zone.
          yield* sql`
            INSERT INTO settlement_scope_recent (wallet_id, scope, scope_key, grain, at, spent_usd)
            SELECT w.id, 'account', '', g.grain,
              date_bin(make_interval(mins => g.grain), now() - make_interval(mins => m), '2000-01-01T00:00:00Z'), 1
            FROM wallets w, generate_series(0, 2) m, (VALUES (1::smallint), (15::smallint)) g (grain)
            WHERE w.budget_usd = 10 AND w.last_sequence = 2
            ON CONFLICT DO NOTHING`
          yield* sql`
            INSERT INTO account_settings (account_kind, account_id, timezone, version)
            SELECT 'user', u.id, 'Europe/Berlin', 1 FROM users u WHERE u.email LIKE 'bulk-%'`
          // Each with a limit and an alert threshold; and 10,000 organisations with a member each.
          yield* sql`
            INSERT INTO spend_limit_sets (account_kind, account_id, version)
            SELECT 'user', u.id, 1 FROM users u WHERE u.email LIKE 'bulk-%'`
          yield* sql`
            INSERT INTO spend_limits (account_kind, account_id, scope, scope_id, period, amount_usd)
            SELECT 'user', u.id, 'account', NULL, 'day', 5 FROM users u WHERE u.email LIKE 'bulk-%'`
          yield* sql`
            INSERT INTO account_alerts (account_kind, account_id, version, thresholds)
            SELECT 'user', u.id, 1, '[]' FROM users u WHERE u.email LIKE 'bulk-%'`
          yield* sql`
            WITH o AS (
              INSERT INTO organisations (name) SELECT 'Bulk ' || n FROM generate_series(1, 10000) n RETURNING id
            ), m AS (
              INSERT INTO users (email, name, password_hash)
              SELECT 'member-' || o.id || '@example.com', 'Member', 'x' FROM o RETURNING id, email
            )
            INSERT INTO memberships (user_id, organisation_id)
            SELECT m.id, o.id FROM m JOIN o ON m.email = 'member-' || o.id || '@example.com'`
          for (
            const table of [
              "organisations",
              "memberships",
              "spend_limit_sets",
              "spend_limits",
              "account_alerts",
              "users",
              "wallets",
              "ledger_entries",
              "settlement_sessions",
              "settlement_records",
              "settlement_spend_totals",
              "settlement_scope_totals",
              "settlement_scope_holds",
              "settlement_scope_recent",
              "account_settings"
            ]
          ) yield* sql.unsafe(`ANALYZE ${table}`)
          // Each statement prepared and planned once for any parameter, as a plan cache keeps it.
          const genericPlan = (name: string, text: string) =>
            sql.withTransaction(Effect.gen(function*() {
              const casts = [...text.matchAll(/\$(\d+)::(\w+)/g)].map(([, n = "", type = ""]) =>
                [Number(n), type] as const
              )
              const count = Math.max(0, ...casts.map(([n]) => n))
              const argument = (n: number) => {
                const type = casts.find(([m]) => m === n)?.[1]
                return type === "json" ? `'[]'` : type === "timestamptz" ? `now()` : "NULL"
              }
              yield* sql`SET LOCAL plan_cache_mode = force_generic_plan`
              yield* sql.unsafe(`PREPARE ${name} AS ${text}`)
              const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(
                `EXPLAIN EXECUTE ${name}(${Array.from({ length: count }, (_, i) => argument(i + 1)).join(", ")})`
              )
              yield* sql.unsafe(`DEALLOCATE ${name}`)
              return rows.map((row) => row["QUERY PLAN"]).join("\n")
            }))
          const growing =
            /Seq Scan on (users|organisations|memberships|repositories|wallets|ledger_entries|settlement_\w+|spend_limits|account_\w+)\b/g
          const plans = {
            read: yield* genericPlan("batch_read", read ?? ""),
            write: yield* genericPlan("batch_write", write ?? "")
          }
          expect({
            read: [...plans.read.matchAll(growing)].map(([scan]) => scan),
            write: [...plans.write.matchAll(growing)].map(([scan]) => scan)
          }).toEqual({ read: [], write: [] })
          // A window's spends are probed by their scope key, never by the time alone (every wallet's).
          expect(plans.read).toMatch(/settlement_scope_recent_pkey/)
          expect(plans.read).not.toMatch(/settlement_scope_recent_age_idx/)
          // The wallets are found by their key and locked in its order; the lock's wait is set once a
          // statement, not once a row read.
          expect(plans.write).toMatch(/Index Scan using wallets_pkey on wallets w\s+\(.*\)\s+Index Cond: \(id = /)
          expect(plans.write).not.toMatch(/Filter: .*set_config/)
        }),
      { timeout: 240_000 }
    )
  })

  describe("the state read keeps to its indexes", () => {
    it.effect(
      "on 100,000 records and sessions of one wallet, even as a generic plan, it reads no table whole",
      () =>
        Effect.gen(function*() {
          const settlement = yield* Settlement
          const sql = yield* SqlClient.SqlClient
          const { account, repository } = yield* governed
          const wire = yield* Wire
          const from = wire.roundTrips.length
          yield* settlement.apply(job(account, "reserve", "probe", { repository_id: repository, amount_usd: "1" }))
          const read = wire.roundTrips.slice(from).find(isRead)
          expect(read).toBeDefined()
          yield* sql`
          INSERT INTO settlement_records (wallet_id, idempotency_key, kind, session_id, outcome)
          SELECT w.id, 'k-' || n, 'reserve', 's-' || n, 'insufficient_funds'
          FROM wallets w, generate_series(1, 100000) n WHERE w.account_id = ${account.id}`
          yield* sql`
          INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, state, expires_at)
          SELECT w.id, 's-' || n, 0, 0, 'released', now() + interval '1 day'
          FROM wallets w, generate_series(1, 100000) n WHERE w.account_id = ${account.id}`
          yield* sql`ANALYZE settlement_records`
          yield* sql`ANALYZE settlement_sessions`
          const request = JSON.stringify({
            accounts: [account.id],
            keys: [{ account_id: account.id, key: "k-500" }, { account_id: account.id, key: "k-70000" }],
            sessions: [{ account_id: account.id, session_id: "s-500" }],
            repositories: [repository],
            users: [],
            members: [{ account_id: account.id, scope: "repository", scope_key: repository }],
            expire: [account.id]
          })
          // A prepared statement planned once for any parameter: what a plan cache would reuse.
          const plan = yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`SET LOCAL plan_cache_mode = force_generic_plan`
            yield* sql.unsafe(`PREPARE batch_read(json) AS ${read ?? ""}`)
            const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(
              `EXPLAIN EXECUTE batch_read('${request.replace(/'/g, "''")}')`
            )
            yield* sql.unsafe("DEALLOCATE batch_read")
            return rows.map((row) => row["QUERY PLAN"]).join("\n")
          }))
          expect(plan).toMatch(/Index (Only )?Scan using settlement_records_pkey/)
          expect(plan).not.toMatch(/Seq Scan on settlement_records|Seq Scan on settlement_sessions/)
        }),
      { timeout: 120_000 }
    )
  })
})
