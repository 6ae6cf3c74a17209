import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { setTimeout as sleep } from "node:timers/promises"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { serveOn } from "../src/Http.js"
import { Wallets } from "../src/Wallets.js"
import { createOrganisation, pointers, problem } from "./support/policies.js"
import { type JobAnswer, plainRunner } from "./support/spendControls.js"
import { call, createUser, type Reply, signIn } from "./support/TestApp.js"
import { TestSettlement } from "./support/TestSettlement.js"

/**
 * Limits where people live (docs/decisions/D22-limits-where-people-live.md), as clients meet
 * them: the account's zone and week start over HTTP, day limits that end at local midnight,
 * rolling windows with the time a refused reserve fits again, every member's own limit, and the
 * effective read that says what a reserve would do. Runners are plain BullMQ; the spends of
 * earlier hours, which a test cannot wait for, are arranged in the counters the batch keeps.
 */

const SETTINGS = "/developer/account/settings"
const LIMITS = "/developer/account/limits"
const EFFECTIVE = "/developer/account/limits/effective"

const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(Layer.provideMerge(TestSettlement()))

const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

/** An organisation with a budget (enforced), an administrator and a member, both signed in. */
const organisation = (budget = "1000") =>
  Effect.gen(function*() {
    const orgId = yield* createOrganisation(`Org ${randomUUID().slice(0, 8)}`)
    const account: Account = { kind: "client", id: orgId }
    const admin = yield* createUser({ admin: true, organisationId: orgId })
    const member = yield* createUser({ organisationId: orgId })
    yield* Effect.orDie(
      Effect.flatMap(Wallets, (wallets) => wallets.setBudget(account, { budget_usd: Money.decimal(budget) }))
    )
    return {
      account,
      orgId,
      admin: { ...admin, token: yield* signIn(admin.email) },
      member: { ...member, token: yield* signIn(member.email) }
    }
  })

const bodyOf = <T>(reply: Reply): T => reply.body as T

interface LimitAnswer {
  readonly id: string
  readonly scope: string
  readonly period: string
  readonly used_usd: string | null
  readonly period_start: string | null
  readonly period_end: string | null
}

const putLimits = (token: string, limits: ReadonlyArray<Record<string, unknown>>, expected_version?: number) =>
  call("PUT", LIMITS, { token, body: { limits, ...(expected_version === undefined ? {} : { expected_version }) } })

/** Saves limits as the only list of the account, whatever its version. */
const replaceLimits = (token: string, limits: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const { version } = bodyOf<{ version: number }>(yield* call("GET", LIMITS, { token }))
    const reply = yield* putLimits(token, limits, version)
    expect(reply.status, JSON.stringify(reply.body)).toBe(200)
    return bodyOf<{ limits: ReadonlyArray<LimitAnswer> }>(reply).limits
  })

const putSettings = (token: string, body: Record<string, unknown>) => call("PUT", SETTINGS, { token, body })

/**
 * Saves the account's zone as if saved before today: a save carries the periods in force then
 * (their bounds under the old zone, D22), so a zone saved now takes effect at the next boundary.
 */
const zoneSavedEarlier = (token: string, account: Account, timezone: string, week_start = "monday") =>
  Effect.gen(function*() {
    const reply = yield* putSettings(token, { timezone, week_start })
    expect(reply.status).toBe(200)
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE account_settings SET carried = '{}' WHERE account_id = ${account.id}`.pipe(Effect.orDie)
  })

/** The database's clock and the bounds it gives a period in a zone (migration 0028). */
const periodIn = (period: string, timezone: string, at = "now()") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ start: Date; end: Date }>`
      SELECT period_start AS start, period_end AS "end"
      FROM account_natural_period(${period}, ${timezone}, 'monday', ${sql.literal(at)})`
    if (row === undefined) return yield* Effect.dieMessage("no period")
    return row
  }).pipe(Effect.orDie)

/**
 * Spends of a scope key booked at `at` as the batch's counters keep them (migrations 0022, 0028):
 * the day's, the quarter hour's and the minute's. Earlier hours' spends, which no test can wait
 * for; the enforcement reads them as it reads the batch's own.
 */
const arrangeSpend = (account: Account, scope: string, scopeKey: string, at: Date, amount: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [wallet] = yield* sql<{ id: string }>`SELECT id FROM wallets WHERE account_id = ${account.id}`
    if (wallet === undefined) return yield* Effect.dieMessage("no wallet")
    yield* sql`
      INSERT INTO settlement_scope_totals (wallet_id, scope, scope_key, day, spent_usd)
      VALUES (${wallet.id}, ${scope}, ${scopeKey}, (${at}::timestamptz AT TIME ZONE 'UTC')::date, ${amount}::numeric)
      ON CONFLICT (wallet_id, scope, scope_key, day) DO UPDATE SET spent_usd = settlement_scope_totals.spent_usd
        + EXCLUDED.spent_usd`
    for (const grain of [1, 15]) {
      yield* sql`
        INSERT INTO settlement_scope_recent (wallet_id, scope, scope_key, grain, at, spent_usd)
        VALUES (${wallet.id}, ${scope}, ${scopeKey}, ${grain},
          date_bin(make_interval(mins => ${grain}), ${at}::timestamptz, '2000-01-01T00:00:00Z'), ${amount}::numeric)
        ON CONFLICT (wallet_id, scope, scope_key, grain, at) DO UPDATE SET spent_usd = settlement_scope_recent.spent_usd
          + EXCLUDED.spent_usd`
    }
  }).pipe(Effect.orDie)

const databaseNow = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ now: Date }>`SELECT now() AS now`).pipe(
  Effect.map((rows) => rows[0]?.now ?? new Date()),
  Effect.orDie
)

const statusOf = (answer: JobAnswer) => answer.result?.status ?? answer.failed

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "240 seconds" })(
  "limits where people live (D22)",
  (it) => {
    describe("the account's settings", () => {
      it.effect("UTC and monday until saved; an administrator saves them under their version, each save an event", () =>
        Effect.gen(function*() {
          const org = yield* organisation()
          expect(bodyOf(yield* call("GET", SETTINGS, { token: org.member.token }))).toEqual({
            timezone: "UTC",
            week_start: "monday",
            version: 0,
            updated_at: null
          })
          const saved = yield* putSettings(org.admin.token, { timezone: "Europe/Berlin", week_start: "sunday" })
          expect(saved.status).toBe(200)
          expect(saved.body).toMatchObject({ timezone: "Europe/Berlin", week_start: "sunday", version: 1 })
          expect(bodyOf(yield* call("GET", SETTINGS, { token: org.member.token }))).toMatchObject({ version: 1 })
          // A stale version is 409; a member is 403 before the body is read; neither saves.
          const stale = yield* putSettings(org.admin.token, {
            timezone: "UTC",
            week_start: "monday",
            expected_version: 0
          })
          expect(stale.status).toBe(409)
          expect(stale.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 1 })
          expect((yield* putSettings(org.member.token, { nonsense: true })).status).toBe(403)
          const again = yield* putSettings(org.admin.token, {
            timezone: "Asia/Kolkata",
            week_start: "monday",
            expected_version: 1
          })
          expect(again.body).toMatchObject({ timezone: "Asia/Kolkata", version: 2 })
          const events = bodyOf<{ events: ReadonlyArray<{ type: string; data: unknown }> }>(
            yield* call("GET", "/developer/account/events?type=settings.updated", { token: org.member.token })
          ).events
          expect(events.map((event) => event.data)).toEqual([
            { user_id: org.admin.id, timezone: "Europe/Berlin", week_start: "sunday", version: 1 },
            { user_id: org.admin.id, timezone: "Asia/Kolkata", week_start: "monday", version: 2 }
          ])
        }))

      it.effect("an unknown zone or week start is 422 at its field, and nothing is saved", () =>
        Effect.gen(function*() {
          const org = yield* organisation()
          const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
            [{ timezone: "Mars/Olympus_Mons", week_start: "monday" }, "#/timezone"],
            [{ timezone: "+05:30", week_start: "monday" }, "#/timezone"],
            [{ timezone: "", week_start: "monday" }, "#/timezone"],
            [{ timezone: "UTC", week_start: "friday" }, "#/week_start"],
            [{ week_start: "monday" }, "#/timezone"]
          ]
          for (const [body, pointer] of cases) {
            const reply = yield* putSettings(org.admin.token, body)
            expect(reply.status, JSON.stringify(body)).toBe(422)
            expect(pointers(reply)).toEqual([pointer])
          }
          expect(bodyOf(yield* call("GET", SETTINGS, { token: org.admin.token }))).toMatchObject({ version: 0 })
        }))
    })

    describe("limits' new fields", () => {
      it.effect("422 at the field, nothing saved: windows, warnings on a rolling limit, each_ scopes' ids", () =>
        Effect.gen(function*() {
          const org = yield* organisation()
          const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
            [{ scope: "account", period: "rolling", window_minutes: 4, amount_usd: "1" }, "#/limits/0/window_minutes"],
            [
              { scope: "account", period: "rolling", window_minutes: 10_081, amount_usd: "1" },
              "#/limits/0/window_minutes"
            ],
            [{ scope: "account", period: "rolling", amount_usd: "1" }, "#/limits/0/window_minutes"],
            [{ scope: "account", period: "day", window_minutes: 60, amount_usd: "1" }, "#/limits/0/window_minutes"],
            [
              { scope: "account", period: "rolling", window_minutes: 60, amount_usd: "1", warn_at_percent: [50] },
              "#/limits/0/warn_at_percent"
            ],
            [{ scope: "each_user", scope_id: org.member.id, period: "day", amount_usd: "1" }, "#/limits/0/scope_id"],
            [
              { scope: "each_repository", scope_id: randomUUID(), period: "day", amount_usd: "1" },
              "#/limits/0/scope_id"
            ],
            [{ scope: "each_label", period: "day", amount_usd: "1" }, "#/limits/0/scope_id"],
            [{ scope: "each_label", scope_id: "team=infra", period: "day", amount_usd: "1" }, "#/limits/0/scope_id"],
            [{ scope: "each_user", period: "session", amount_usd: "1" }, "#/limits/0/period"],
            [{ scope: "account", period: "fortnight", amount_usd: "1" }, "#/limits/0/period"]
          ]
          for (const [limit, pointer] of cases) {
            const reply = yield* putLimits(org.admin.token, [limit])
            expect(reply.status, JSON.stringify(limit)).toBe(422)
            expect(pointers(reply), JSON.stringify(limit)).toEqual([pointer])
          }
          expect(bodyOf(yield* call("GET", LIMITS, { token: org.admin.token }))).toMatchObject({
            version: 0,
            limits: []
          })
          // Rolling limits of one scope with different windows are different limits; the same window twice is not.
          const twice = yield* putLimits(org.admin.token, [
            { scope: "account", period: "rolling", window_minutes: 60, amount_usd: "1" },
            { scope: "account", period: "rolling", window_minutes: 60, amount_usd: "2" }
          ])
          expect(pointers(twice)).toEqual(["#/limits/1"])
          const saved = yield* replaceLimits(org.admin.token, [
            { scope: "account", period: "rolling", window_minutes: 300, amount_usd: "2" },
            { scope: "account", period: "rolling", window_minutes: 60, amount_usd: "1" },
            { scope: "each_label", scope_id: "team", period: "hour", amount_usd: "3" }
          ])
          expect(
            saved.map((
              limit
            ) => [limit.scope, limit.period, (limit as unknown as { window_minutes: number }).window_minutes])
          )
            .toEqual([["account", "rolling", 60], ["account", "rolling", 300], ["each_label", "hour", null]])
        }))
    })

    describe("periods in the account's zone", () => {
      it.scoped("Los Angeles: a day limit reached at 23:30 local no longer binds after local midnight, whatever UTC says", () =>
        Effect.gen(function*() {
          const { send } = yield* runner
          const org = yield* organisation()
          yield* zoneSavedEarlier(org.admin.token, org.account, "America/Los_Angeles")
          const [limit] = yield* replaceLimits(org.admin.token, [{ scope: "account", period: "day", amount_usd: "10" }])
          const today = yield* periodIn("day", "America/Los_Angeles")
          // The GET shows the local day, with its offset: midnight to midnight in Los Angeles.
          expect(limit?.period_start).toMatch(/T00:00:00-0[78]:00$/)
          expect(new Date(limit?.period_start ?? "").getTime()).toBe(today.start.getTime())
          expect(new Date(limit?.period_end ?? "").getTime()).toBe(today.end.getTime())
          const reserve = (session_id: string, amount_usd: string) =>
            send("reserve", { account_id: org.account.id, session_id, amount_usd, idempotency_key: randomUUID() })
          // $10 spent at 23:30 yesterday, Los Angeles time: under UTC days it would count today.
          yield* arrangeSpend(org.account, "account", "", new Date(today.start.getTime() - 30 * 60_000), "10")
          expect(statusOf(yield* reserve("after-midnight", "10"))).toBe("applied")
          // The day's own spends count: one more cent is refused, by the day limit.
          const refused = yield* reserve("one-cent-more", "0.01")
          expect(refused.result).toMatchObject({
            status: "limit_reached",
            limit: { period: "day", used_usd: "10.000000" }
          })
        }))

      it.effect("Kolkata's day starts at 18:30 UTC, its hour at half past; weeks start on the account's day", () =>
        Effect.gen(function*() {
          const org = yield* organisation()
          yield* zoneSavedEarlier(org.admin.token, org.account, "Asia/Kolkata", "sunday")
          const limits = yield* replaceLimits(org.admin.token, [
            { scope: "account", period: "hour", amount_usd: "1" },
            { scope: "account", period: "day", amount_usd: "1" },
            { scope: "account", period: "week", amount_usd: "1" }
          ])
          const byPeriod = new Map(limits.map((limit) => [limit.period, limit]))
          expect(byPeriod.get("day")?.period_start).toMatch(/T00:00:00\+05:30$/)
          expect(new Date(byPeriod.get("day")?.period_start ?? "").toISOString()).toMatch(/T18:30:00\.000Z$/)
          expect(byPeriod.get("hour")?.period_start).toMatch(/:00:00\+05:30$/)
          expect(new Date(byPeriod.get("hour")?.period_start ?? "").toISOString()).toMatch(/:30:00\.000Z$/)
          const weekStart = new Date(byPeriod.get("week")?.period_start ?? "")
          // Sunday, local: 18:30 UTC on a Saturday.
          expect(weekStart.getUTCDay()).toBe(6)
          expect(weekStart.toISOString()).toMatch(/T18:30:00\.000Z$/)
        }))

      it.scoped("a change of zone mid-day keeps the day in force; its use is the ledger's spend, counted once", () =>
        Effect.gen(function*() {
          const { send } = yield* runner
          const org = yield* organisation()
          const [before] = yield* replaceLimits(org.admin.token, [{
            scope: "account",
            period: "day",
            amount_usd: "100"
          }])
          const session = (n: number) => ({ account_id: org.account.id, session_id: `s-${n}` })
          expect(statusOf(yield* send("reserve", { ...session(1), amount_usd: "3", idempotency_key: randomUUID() })))
            .toBe("applied")
          yield* send("spend", { ...session(1), amount_usd: "3", idempotency_key: randomUUID() })
          yield* putSettings(org.admin.token, { timezone: "Asia/Tokyo", week_start: "monday" })
          yield* send("reserve", { ...session(2), amount_usd: "2", idempotency_key: randomUUID() })
          yield* send("spend", { ...session(2), amount_usd: "2", idempotency_key: randomUUID() })
          const [after] = bodyOf<{ limits: ReadonlyArray<LimitAnswer> }>(
            yield* call("GET", LIMITS, { token: org.member.token })
          ).limits
          // The day in force keeps its UTC bounds, shown in Tokyo's offset.
          expect(new Date(after?.period_start ?? "").getTime()).toBe(new Date(before?.period_start ?? "").getTime())
          expect(new Date(after?.period_end ?? "").getTime()).toBe(new Date(before?.period_end ?? "").getTime())
          expect(after?.period_start).toMatch(/\+09:00$/)
          // Both spends once, as the ledger has them (the holds were spent whole).
          const sql = yield* SqlClient.SqlClient
          const [ledger] = yield* sql<{ spent: string }>`
          SELECT sum(e.amount_usd)::text AS spent FROM ledger_entries e JOIN wallets w ON w.id = e.wallet_id
          WHERE w.account_id = ${org.account.id} AND e.kind = 'spend'`.pipe(Effect.orDie)
          expect(after?.used_usd).toBe(Money.format(Money.decimal(ledger?.spent ?? "0")))
          expect(after?.used_usd).toBe("5.000000")
          // The next day starts where this one ends and ends at Tokyo's next midnight: one short day.
          const [next] = yield* sql<{ start: Date; end: Date }>`
          SELECT p.period_start AS start, p.period_end AS "end" FROM account_settings s,
            account_period('day', s.timezone, s.week_start, s.carried, ${after?.period_end ?? ""}::timestamptz) p
          WHERE s.account_id = ${org.account.id}`.pipe(Effect.orDie)
          const tokyo = yield* periodIn("day", "Asia/Tokyo", `'${after?.period_end ?? ""}'::timestamptz`)
          expect(next?.start.getTime()).toBe(new Date(after?.period_end ?? "").getTime())
          expect(next?.end.getTime()).toBe(tokyo.end.getTime())
        }))
    })

    describe("the spend report in the account's zone", () => {
      it.scoped("days and months are the zone's: a spend's day is its local date, the default window the local month", () =>
        Effect.gen(function*() {
          const { send } = yield* runner
          const org = yield* organisation()
          yield* zoneSavedEarlier(org.admin.token, org.account, "Pacific/Kiritimati")
          const session = { account_id: org.account.id, session_id: "reported" }
          yield* send("reserve", { ...session, amount_usd: "3", idempotency_key: randomUUID() })
          yield* send("spend", { ...session, amount_usd: "2.5", idempotency_key: randomUUID() })
          const now = yield* databaseNow
          // Fourteen hours ahead of UTC: most of the day, its date is not the UTC date.
          const local = new Intl.DateTimeFormat("en-CA", { timeZone: "Pacific/Kiritimati" }).format(now)
          const report = bodyOf<
            { from: string; to: string; groups: ReadonlyArray<{ key: string; spent_usd: string }> }
          >(
            yield* call("GET", "/developer/account/spend?group_by=day", { token: org.member.token })
          )
          expect(report.groups).toEqual([expect.objectContaining({ key: local, spent_usd: "2.500000" })])
          // The window: the local month, from its first midnight in the zone (UTC+14).
          const month = yield* periodIn("month", "Pacific/Kiritimati")
          expect([report.from, report.to]).toEqual([month.start.toISOString(), month.end.toISOString()])
          // A plain date is that day of the zone.
          const day = bodyOf<{ from: string; groups: ReadonlyArray<{ key: string }> }>(
            yield* call("GET", `/developer/account/spend?group_by=day&from=${local}`, { token: org.member.token })
          )
          const start = yield* periodIn("day", "Pacific/Kiritimati")
          expect(day.from).toBe(start.start.toISOString())
          expect(day.groups.map((group) => group.key)).toEqual([local])
        }))
    })

    describe("rolling windows", () => {
      it.scoped(
        "a refusal says when a reserve of its size fits again, and after that long it does",
        () =>
          Effect.gen(function*() {
            const { send } = yield* runner
            const org = yield* organisation()
            yield* replaceLimits(org.admin.token, [
              { scope: "account", period: "rolling", window_minutes: 5, amount_usd: "10" }
            ])
            // $8 spent four minutes ago: it leaves the five-minute window within the minute.
            const now = yield* databaseNow
            yield* arrangeSpend(org.account, "account", "", new Date(now.getTime() - 4 * 60_000), "8")
            const reserve = (amount_usd: string) =>
              send("reserve", {
                account_id: org.account.id,
                session_id: `s-${randomUUID()}`,
                amount_usd,
                idempotency_key: randomUUID()
              })
            const refused = (yield* reserve("5")).result
            expect(refused).toMatchObject({
              status: "limit_reached",
              limit: { period: "rolling", window_minutes: 5, used_usd: "8.000000" },
              max_reservable_usd: "2.000000"
            })
            const retry = refused?.retry_after_seconds
            expect(typeof retry).toBe("number")
            expect(Number(retry)).toBeGreaterThan(0)
            expect(Number(retry)).toBeLessThanOrEqual(60)
            // Larger than the limit: it never fits.
            expect((yield* reserve("11")).result).toMatchObject({ status: "limit_reached", retry_after_seconds: null })
            yield* Effect.promise(() => sleep(Number(retry) * 1000 + 1500))
            expect((yield* reserve("5")).result).toMatchObject({ status: "applied" })
          }),
        { timeout: 120_000 }
      )

      it.scoped("under a burst, reservations never take a rolling limit past its amount", () =>
        Effect.gen(function*() {
          const { send } = yield* runner
          const org = yield* organisation()
          yield* replaceLimits(org.admin.token, [
            { scope: "account", period: "rolling", window_minutes: 60, amount_usd: "10" }
          ])
          const answers = yield* Effect.all(
            Array.from({ length: 25 }, (_, i) =>
              send("reserve", {
                account_id: org.account.id,
                session_id: `burst-${i}`,
                amount_usd: "1",
                idempotency_key: randomUUID()
              })),
            { concurrency: "unbounded" }
          )
          const statuses = answers.map(statusOf)
          expect(statuses.filter((status) => status === "applied")).toHaveLength(10)
          expect(statuses.filter((status) => status === "limit_reached")).toHaveLength(15)
          const [limit] = bodyOf<{ limits: ReadonlyArray<LimitAnswer> }>(
            yield* call("GET", LIMITS, { token: org.member.token })
          ).limits
          expect(limit).toMatchObject({ used_usd: "10.000000", period_start: null, period_end: null })
        }))
    })

    describe("every member's own limit", () => {
      it.scoped(
        "each_user day $5 with one user's own $20: 30 users at once, each stops at $5, that one at $20",
        () =>
          Effect.gen(function*() {
            const { send } = yield* runner
            const org = yield* organisation()
            const users = yield* Effect.all(Array.from({ length: 30 }, () => createUser({ organisationId: org.orgId })))
            const big = users[0]
            if (big === undefined) return
            yield* replaceLimits(org.admin.token, [
              { scope: "each_user", period: "day", amount_usd: "5" },
              { scope: "user", scope_id: big.id, period: "day", amount_usd: "20" }
            ])
            const reserve = (user_id: string, i: number) =>
              send("reserve", {
                account_id: org.account.id,
                session_id: `${user_id}-${i}`,
                amount_usd: "1",
                idempotency_key: randomUUID(),
                user_id
              })
            const answers = yield* Effect.all(
              users.flatMap((user) => Array.from({ length: 7 }, (_, i) => reserve(user.id, i))),
              { concurrency: 40 }
            )
            const applied = new Map<string, number>()
            answers.forEach((answer, i) => {
              const user = users[Math.floor(i / 7)]
              if (user !== undefined && statusOf(answer) === "applied") {
                applied.set(user.id, (applied.get(user.id) ?? 0) + 1)
              }
            })
            expect(applied.get(big.id)).toBe(7)
            for (const user of users.slice(1)) expect(applied.get(user.id), user.id).toBe(5)
            // A refusal names the default and the member it applied to.
            const sixth = answers[1 * 7 + 6]?.result
            expect(sixth).toMatchObject({
              status: "limit_reached",
              limit: { scope: "each_user", applies_to: users[1]?.id, period: "day", used_usd: "5.000000" }
            })
            // A user who joins now is limited with no write.
            const newcomer = yield* createUser({ organisationId: org.orgId })
            expect(
              (yield* send("reserve", {
                account_id: org.account.id,
                session_id: "newcomer",
                amount_usd: "6",
                idempotency_key: randomUUID(),
                user_id: newcomer.id
              })).result
            ).toMatchObject({ status: "limit_reached", max_reservable_usd: "5.000000" })
            // A reserve attributed to no user is not judged by each_user.
            expect(statusOf(
              yield* send("reserve", {
                account_id: org.account.id,
                session_id: "nobody",
                amount_usd: "50",
                idempotency_key: randomUUID()
              })
            )).toBe("applied")
          }),
        { timeout: 180_000 }
      )

      it.scoped("each_user concurrency: one open session per user, each user counted apart", () =>
        Effect.gen(function*() {
          const { send } = yield* runner
          const org = yield* organisation()
          yield* replaceLimits(org.admin.token, [{ scope: "each_user", period: "concurrent", max_open_sessions: 1 }])
          const open = (user_id: string, session_id: string) =>
            send("reserve", {
              account_id: org.account.id,
              session_id,
              amount_usd: "1",
              idempotency_key: randomUUID(),
              user_id
            })
          expect(statusOf(yield* open(org.admin.id, "a-1"))).toBe("applied")
          expect((yield* open(org.admin.id, "a-2")).result).toMatchObject({
            status: "limit_reached",
            limit: { scope: "each_user", applies_to: org.admin.id, max_open_sessions: 1, open_sessions: 1 }
          })
          expect(statusOf(yield* open(org.member.id, "m-1"))).toBe("applied")
        }))
    })

    describe("what applies", () => {
      it.scoped("the effective read lists the limits a reserve would meet; max_reservable_usd applies, a cent more is refused", () =>
        Effect.gen(function*() {
          const { send } = yield* runner
          const org = yield* organisation("50")
          yield* replaceLimits(org.admin.token, [
            { scope: "account", period: "month", amount_usd: "40" },
            { scope: "each_user", period: "day", amount_usd: "7.5" },
            { scope: "each_label", scope_id: "team", period: "rolling", window_minutes: 60, amount_usd: "30" },
            { scope: "label", scope_id: "team=web", period: "day", amount_usd: "1" }
          ])
          expect(statusOf(
            yield* send("reserve", {
              account_id: org.account.id,
              session_id: "earlier",
              amount_usd: "2.25",
              idempotency_key: randomUUID(),
              user_id: org.member.id
            })
          )).toBe("applied")
          const reply = yield* call("GET", `${EFFECTIVE}?user_id=${org.member.id}&labels=team:infra`, {
            token: org.member.token
          })
          expect(reply.status).toBe(200)
          const effective = bodyOf<{
            limits: ReadonlyArray<
              LimitAnswer & { applies_as: string; applies_to: string | null; remaining_usd: string }
            >
            funds_usd: string | null
            max_reservable_usd: string | null
          }>(reply)
          expect(
            effective.limits.map((limit) => [limit.applies_as, limit.applies_to, limit.used_usd, limit.remaining_usd])
          )
            .toEqual([
              ["account", null, "2.250000", "37.750000"],
              ["each_user", org.member.id, "2.250000", "5.250000"],
              ["each_label", "team=infra", "0.000000", "30.000000"]
            ])
          expect(effective.funds_usd).toBe("47.750000")
          expect(effective.max_reservable_usd).toBe("5.250000")
          const reserve = (amount_usd: string) =>
            send("reserve", {
              account_id: org.account.id,
              session_id: `s-${randomUUID()}`,
              amount_usd,
              idempotency_key: randomUUID(),
              user_id: org.member.id,
              labels: { team: "infra" }
            })
          expect((yield* reserve("5.26")).result).toMatchObject({
            status: "limit_reached",
            max_reservable_usd: "5.250000"
          })
          expect(statusOf(yield* reserve("5.25"))).toBe("applied")
          // The label's own limit replaces each_label for its value.
          const web = bodyOf<{ limits: ReadonlyArray<{ applies_as: string; scope: string }> }>(
            yield* call("GET", `${EFFECTIVE}?labels=team:web`, { token: org.member.token })
          )
          // Of another period, each_label still applies beside it.
          expect(web.limits.map((limit) => limit.scope)).toEqual(["account", "label", "each_label"])
        }))

      it.effect("422 at the parameter for ids that are no UUID or not of the account, and labels that do not parse", () =>
        Effect.gen(function*() {
          const org = yield* organisation()
          const stranger = yield* organisation()
          const cases: ReadonlyArray<readonly [string, string]> = [
            ["user_id=nope", "#/query/user_id"],
            [`user_id=${stranger.member.id}`, "#/query/user_id"],
            [`repository_id=${randomUUID()}`, "#/query/repository_id"],
            ["labels=team", "#/query/labels"],
            ["labels=team:a,team:b", "#/query/labels"],
            ["labels=Team:a", "#/query/labels"],
            ["labels=team:", "#/query/labels"]
          ]
          for (const [query, pointer] of cases) {
            const reply = yield* call("GET", `${EFFECTIVE}?${query}`, { token: org.member.token })
            expect(reply.status, query).toBe(422)
            expect(pointers(reply), query).toEqual([pointer])
          }
        }))
    })
  }
)
