import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { createOrganisation, createRepository, pointers, problem } from "./support/policies.js"
import { call, createUser, type Reply, signedInUser, signIn, TestApp } from "./support/TestApp.js"

/**
 * Spend controls over HTTP (D16, docs/decisions/D16-spend-controls.md): the limits' GET and PUT
 * and the spend report, as an organisation's administrator and members meet them. The running
 * totals and sessions the settlement worker writes are arranged here with SQL.
 */

const LIMITS = "/developer/account/limits"
const SPEND = "/developer/account/spend"

const DAY_MS = 86_400_000

/** An organisation with an administrator, a member (both signed in) and two repositories. */
const organisation = Effect.gen(function*() {
  const orgId = yield* createOrganisation(`Org ${randomUUID().slice(0, 8)}`)
  const admin = yield* createUser({ admin: true, organisationId: orgId })
  const member = yield* createUser({ organisationId: orgId })
  return {
    orgId,
    admin: { ...admin, token: yield* signIn(admin.email) },
    member: { ...member, token: yield* signIn(member.email) },
    repositories: [yield* createRepository(orgId), yield* createRepository(orgId)] as const
  }
})

const putLimits = (token: string, body: unknown) => call("PUT", LIMITS, { token, body })

const bodyOf = (reply: Reply) => reply.body as Record<string, unknown>

interface LimitAnswer {
  readonly id: string
  readonly scope: string
  readonly scope_id: string | null
  readonly period: string
  readonly amount_usd: string
  readonly used_usd: string
  readonly period_start: string | null
  readonly period_end: string | null
}

const limitsOf = (reply: Reply) => (bodyOf(reply).limits ?? []) as ReadonlyArray<LimitAnswer>

/** The wallet's id, creating the wallet as its first read does. */
const walletOf = (token: string) =>
  Effect.map(call("GET", "/developer/account/wallet", { token }), (reply) => String(bodyOf(reply).id))

interface TotalsRow {
  readonly day: string
  readonly repository_id?: string | null
  readonly user_id?: string | null
  readonly spent_usd: string
  readonly unfunded_usd?: string
  readonly sessions?: number
}

/** Running totals as the settlement transaction leaves them. */
const seedTotals = (walletId: string, rows: ReadonlyArray<TotalsRow>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const row of rows) {
      yield* sql`INSERT INTO settlement_spend_totals (wallet_id, day, repository_id, user_id, spent_usd, unfunded_usd, sessions)
                 VALUES (${walletId}, ${row.day}::date, ${row.repository_id ?? null}, ${row.user_id ?? null},
                         ${row.spent_usd}::numeric, ${row.unfunded_usd ?? "0"}::numeric, ${row.sessions ?? 1})`
    }
  }).pipe(Effect.orDie)

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10)
const midnight = (ms: number) => ms - (ms % DAY_MS)

layer(TestApp(), { excludeTestServices: true, timeout: "120 seconds" })("spend controls (D16)", (it) => {
  describe("authentication", () => {
    it.effect("every endpoint without a token is 401 unauthenticated", () =>
      Effect.gen(function*() {
        for (
          const reply of [
            yield* call("GET", LIMITS),
            yield* call("PUT", LIMITS, { body: { limits: [] } }),
            yield* call("GET", `${SPEND}?group_by=day`)
          ]
        ) {
          expect(reply.status).toBe(401)
          expect(reply.body).toMatchObject(problem(401, "unauthenticated"))
        }
      }))
  })

  describe("GET /developer/account/limits", () => {
    it.effect("before any save it is version 0 with no limits and updated_at null, for any member", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        for (const token of [org.member.token, org.admin.token]) {
          const reply = yield* call("GET", LIMITS, { token })
          expect(reply.status).toBe(200)
          expect(reply.body).toEqual({ version: 0, timezone: "UTC", limits: [], updated_at: null })
        }
      }))
  })

  describe("PUT /developer/account/limits", () => {
    it.effect("an administrator replaces the list: version 1, each limit with its id, use and period's bounds", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const [repository] = org.repositories
        const sent = [
          { scope: "account", period: "month", amount_usd: "500" },
          { scope: "repository", scope_id: repository, period: "day", amount_usd: "20.5" },
          { scope: "user", scope_id: org.member.id, period: "week", amount_usd: "75" },
          { scope: "session", scope_id: null, period: "session", amount_usd: "5" }
        ]
        const before = Date.now()
        const reply = yield* putLimits(org.admin.token, { limits: sent })
        const after = Date.now()
        expect(reply.status).toBe(200)
        expect(bodyOf(reply)).toMatchObject({ version: 1, updated_at: expect.any(String) })
        const limits = limitsOf(reply)
        expect(limits.map(({ amount_usd, period, scope, scope_id, used_usd }) => ({
          scope,
          scope_id,
          period,
          amount_usd,
          used_usd
        }))).toEqual([
          { scope: "account", scope_id: null, period: "month", amount_usd: "500.000000", used_usd: "0.000000" },
          {
            scope: "repository",
            scope_id: repository,
            period: "day",
            amount_usd: "20.500000",
            used_usd: "0.000000"
          },
          { scope: "user", scope_id: org.member.id, period: "week", amount_usd: "75.000000", used_usd: "0.000000" },
          { scope: "session", scope_id: null, period: "session", amount_usd: "5.000000", used_usd: "0.000000" }
        ])
        for (const limit of limits) expect(limit.id).toMatch(/^[0-9a-f-]{36}$/)
        // The bounds of the UTC period holding now, written out here rather than read from the code,
        // with the zone's offset (D22: a UTC account's is +00:00).
        const utc = (ms: number) => new Date(ms).toISOString().replace(".000Z", "+00:00")
        const today = midnight(before)
        const byPeriod = new Map(limits.map((limit) => [limit.period, limit]))
        if (midnight(after) === today) {
          const now = new Date(before)
          const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)
          const monthEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)
          const weekStart = today - ((now.getUTCDay() + 6) % 7) * DAY_MS
          expect(byPeriod.get("day")).toMatchObject({
            period_start: utc(today),
            period_end: utc(today + DAY_MS)
          })
          expect(byPeriod.get("week")).toMatchObject({
            period_start: utc(weekStart),
            period_end: utc(weekStart + 7 * DAY_MS)
          })
          expect(byPeriod.get("month")).toMatchObject({
            period_start: utc(monthStart),
            period_end: utc(monthEnd)
          })
        }
        expect(byPeriod.get("session")).toMatchObject({ period_start: null, period_end: null })
        // A member reads what the administrator saved.
        const read = yield* call("GET", LIMITS, { token: org.member.token })
        expect(read.status).toBe(200)
        expect(read.body).toEqual(reply.body)
      }))

    it.effect("a later save needs the version read; a limit kept keeps its id, one left out is gone, [] clears all", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const [first, second] = org.repositories
        const one = yield* putLimits(org.admin.token, {
          limits: [
            { scope: "repository", scope_id: first, period: "month", amount_usd: "10" },
            { scope: "repository", scope_id: second, period: "month", amount_usd: "10" },
            { scope: "session", period: "session", amount_usd: "2" }
          ],
          expected_version: 0
        })
        expect(one.status).toBe(200)
        const kept = limitsOf(one).find((limit) => limit.scope_id === first)
        const dropped = limitsOf(one).find((limit) => limit.scope_id === second)
        const session = limitsOf(one).find((limit) => limit.scope === "session")
        const two = yield* putLimits(org.admin.token, {
          limits: [
            { scope: "session", scope_id: null, period: "session", amount_usd: "2.5" },
            { scope: "repository", scope_id: first, period: "month", amount_usd: "12" },
            { scope: "account", period: "day", amount_usd: "3" }
          ],
          expected_version: 1
        })
        expect(two.status).toBe(200)
        expect(bodyOf(two).version).toBe(2)
        const limits = limitsOf(two)
        // Listed by scope, then period, then scope id, whatever order they were sent in.
        expect(limits.map((limit) => [limit.scope, limit.amount_usd])).toEqual([
          ["account", "3.000000"],
          ["repository", "12.000000"],
          ["session", "2.500000"]
        ])
        expect(limits[1]?.id).toBe(kept?.id)
        expect(limits[2]?.id).toBe(session?.id)
        expect(limits.map((limit) => limit.id)).not.toContain(dropped?.id)
        const cleared = yield* putLimits(org.admin.token, { limits: [], expected_version: 2 })
        expect(cleared.status).toBe(200)
        expect(cleared.body).toMatchObject({ version: 3, limits: [] })
      }))

    it.effect("a member is 403 forbidden before the body is looked at, and nothing is saved", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        for (
          const body of [
            { limits: [{ scope: "account", period: "month", amount_usd: "1" }] },
            { limits: "not a list", unknown: true },
            { limits: [{ scope: "repository", scope_id: randomUUID(), period: "day", amount_usd: "1" }] }
          ]
        ) {
          const reply = yield* putLimits(org.member.token, body)
          expect(reply.status).toBe(403)
          expect(reply.body).toMatchObject(problem(403, "forbidden"))
        }
        const notJson = yield* call("PUT", LIMITS, { token: org.member.token, rawBody: "{not json" })
        expect(notJson.status).toBe(403)
        expect((yield* call("GET", LIMITS, { token: org.member.token })).body).toMatchObject({ version: 0 })
      }))

    it.effect("a stale expected_version is 409 version_conflict with current_version, and nothing is saved", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const limits = [{ scope: "account", period: "week", amount_usd: "9" }]
        expect((yield* putLimits(org.admin.token, { limits })).status).toBe(200)
        for (const expected_version of [0, 2, 7]) {
          const reply = yield* putLimits(org.admin.token, {
            limits: [{ scope: "account", period: "week", amount_usd: "1" }],
            ...(expected_version === 0 ? {} : { expected_version })
          })
          expect(reply.status).toBe(409)
          expect(reply.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 1 })
        }
        const read = yield* call("GET", LIMITS, { token: org.admin.token })
        expect(bodyOf(read).version).toBe(1)
        expect(limitsOf(read).map((limit) => limit.amount_usd)).toEqual(["9.000000"])
      }))

    it.effect("of writers racing from one version, exactly one succeeds", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const replies = yield* Effect.all(
          Array.from({ length: 6 }, (_, i) =>
            putLimits(org.admin.token, { limits: [{ scope: "account", period: "day", amount_usd: String(i + 1) }] })),
          { concurrency: "unbounded" }
        )
        expect(
          replies.map((reply) =>
            reply.status
          ).sort()
        ).toEqual([200, 409, 409, 409, 409, 409])
      }))

    describe("422 validation_failed, at the field, nothing saved", () => {
      const refused = (token: string, body: unknown, expected: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const reply = yield* putLimits(token, body)
          expect(reply.status, JSON.stringify(reply.body)).toBe(422)
          expect(reply.body).toMatchObject(problem(422, "validation_failed"))
          expect(pointers(reply)).toEqual([...expected].sort())
          return reply
        })

      it.effect("invalid values: scope, period, amount, scope_id, unknown and missing fields, version", () =>
        Effect.gen(function*() {
          const org = yield* organisation
          const limit = { scope: "account", period: "month", amount_usd: "10" }
          yield* refused(org.admin.token, { limits: [{ ...limit, scope: "organisation" }] }, ["#/limits/0/scope"])
          yield* refused(org.admin.token, { limits: [{ ...limit, period: "year" }] }, ["#/limits/0/period"])
          for (const amount_usd of ["0", "0.000000", "-1", "1.1234567", "1e3", "", 10]) {
            yield* refused(org.admin.token, { limits: [{ ...limit, amount_usd }] }, ["#/limits/0/amount_usd"])
          }
          yield* refused(org.admin.token, {
            limits: [{ scope: "repository", scope_id: "not-a-uuid", period: "day", amount_usd: "1" }]
          }, ["#/limits/0/scope_id"])
          yield* refused(org.admin.token, { limits: [{ ...limit, note: "x" }] }, ["#/limits/0/note"])
          yield* refused(org.admin.token, { limits: [{ scope: "account", period: "month" }] }, [
            "#/limits/0/amount_usd"
          ])
          yield* refused(org.admin.token, { limits: [limit], expected_version: -1 }, ["#/expected_version"])
          yield* refused(org.admin.token, { limits: [limit], extra: 1 }, ["#/extra"])
          yield* refused(org.admin.token, {}, ["#/limits"])
          // Every offending field at once.
          yield* refused(org.admin.token, {
            limits: [{ ...limit, scope: "x" }, limit, { ...limit, amount_usd: "0" }]
          }, ["#/limits/0/scope", "#/limits/2/amount_usd"])
          expect((yield* call("GET", LIMITS, { token: org.admin.token })).body).toMatchObject({ version: 0 })
        }))

      it.effect("a scope id where the scope takes none or missing where it does, a period that does not fit", () =>
        Effect.gen(function*() {
          const org = yield* organisation
          const [repository] = org.repositories
          yield* refused(org.admin.token, {
            limits: [
              { scope: "repository", period: "day", amount_usd: "1" },
              { scope: "user", scope_id: null, period: "day", amount_usd: "1" },
              { scope: "account", scope_id: repository, period: "day", amount_usd: "1" },
              { scope: "session", scope_id: repository, period: "session", amount_usd: "1" }
            ]
          }, ["#/limits/0/scope_id", "#/limits/1/scope_id", "#/limits/2/scope_id", "#/limits/3/scope_id"])
          yield* refused(org.admin.token, {
            limits: [
              { scope: "session", period: "month", amount_usd: "1" },
              { scope: "account", period: "session", amount_usd: "1" },
              { scope: "repository", scope_id: repository, period: "session", amount_usd: "1" }
            ]
          }, ["#/limits/0/period", "#/limits/1/period", "#/limits/2/period"])
        }))

      it.effect("two limits of one scope, scope_id and period (ids compared whatever their case)", () =>
        Effect.gen(function*() {
          const org = yield* organisation
          const [repository] = org.repositories
          const reply = yield* refused(org.admin.token, {
            limits: [
              { scope: "account", period: "month", amount_usd: "1" },
              { scope: "repository", scope_id: repository, period: "day", amount_usd: "1" },
              { scope: "account", scope_id: null, period: "month", amount_usd: "2" },
              { scope: "repository", scope_id: repository.toUpperCase(), period: "day", amount_usd: "3" },
              { scope: "repository", scope_id: repository, period: "week", amount_usd: "3" }
            ]
          }, ["#/limits/2", "#/limits/3"])
          expect(JSON.stringify(reply.body)).toContain("#/limits/0")
        }))

      it.effect("a repository or user that is not the account's: unknown, another account's, or its own elsewhere", () =>
        Effect.gen(function*() {
          const org = yield* organisation
          const other = yield* organisation
          const loner = yield* signedInUser()
          const lonerRepository = yield* createRepository(loner.id)
          yield* refused(org.admin.token, {
            limits: [
              { scope: "repository", scope_id: randomUUID(), period: "day", amount_usd: "1" },
              { scope: "repository", scope_id: other.repositories[0], period: "day", amount_usd: "1" },
              { scope: "repository", scope_id: org.repositories[0], period: "day", amount_usd: "1" },
              { scope: "user", scope_id: randomUUID(), period: "day", amount_usd: "1" },
              { scope: "user", scope_id: other.member.id, period: "day", amount_usd: "1" },
              { scope: "user", scope_id: loner.id, period: "day", amount_usd: "1" },
              { scope: "user", scope_id: org.member.id, period: "day", amount_usd: "1" },
              { scope: "user", scope_id: org.admin.id, period: "week", amount_usd: "1" }
            ]
          }, [
            "#/limits/0/scope_id",
            "#/limits/1/scope_id",
            "#/limits/3/scope_id",
            "#/limits/4/scope_id",
            "#/limits/5/scope_id"
          ])
          // A lone user's account: the user is its own, an organisation's member is not (D3).
          const lonerAdmin = yield* signedInUser({ admin: true })
          const own = yield* putLimits(lonerAdmin.token, {
            limits: [{ scope: "user", scope_id: lonerAdmin.id, period: "month", amount_usd: "1" }]
          })
          expect(own.status).toBe(200)
          yield* refused(lonerAdmin.token, {
            limits: [
              { scope: "user", scope_id: org.member.id, period: "month", amount_usd: "1" },
              { scope: "repository", scope_id: lonerRepository, period: "month", amount_usd: "1" }
            ],
            expected_version: 1
          }, ["#/limits/0/scope_id", "#/limits/1/scope_id"])
        }))

      it.effect("more than 100 limits", () =>
        Effect.gen(function*() {
          const org = yield* organisation
          const many = (n: number) =>
            Array.from({ length: n }, (_, i) => ({
              scope: "account",
              period: (["day", "week", "month"] as const)[i % 3],
              amount_usd: String(i + 1)
            }))
          yield* refused(org.admin.token, { limits: many(101) }, ["#/limits"])
          // 100 is allowed by the count (these three periods then repeat, so the duplicates are named).
          const hundred = yield* putLimits(org.admin.token, { limits: many(100) })
          expect(hundred.status).toBe(422)
          expect(pointers(hundred)).not.toContain("#/limits")
        }))
    })
  })

  describe("used_usd", () => {
    it.effect("counts the current period's spends in scope and the holds open now", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const [repository, otherRepository] = org.repositories
        const walletId = yield* walletOf(org.admin.token)
        const now = Date.now()
        const today = isoDay(now)
        // Far enough back to be in no current day, week or month.
        const longAgo = isoDay(now - 40 * DAY_MS)
        yield* seedTotals(walletId, [
          { day: today, repository_id: repository, user_id: org.member.id, spent_usd: "2.5" },
          { day: today, repository_id: otherRepository, user_id: null, spent_usd: "1.25" },
          { day: today, spent_usd: "0.25" },
          { day: longAgo, repository_id: repository, user_id: org.member.id, spent_usd: "100" }
        ])
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, expires_at, repository_id)
                   VALUES (${walletId}, 'open-one', 4, 1, now() + interval '1 hour', ${repository})`.pipe(Effect.orDie)
        const reply = yield* putLimits(org.admin.token, {
          limits: [
            { scope: "account", period: "month", amount_usd: "1000" },
            { scope: "repository", scope_id: repository, period: "day", amount_usd: "10" },
            { scope: "user", scope_id: org.member.id, period: "week", amount_usd: "10" },
            { scope: "session", period: "session", amount_usd: "10" }
          ]
        })
        expect(reply.status).toBe(200)
        if (isoDay(Date.now()) !== today) return // the day turned over between the rows and the read
        expect(limitsOf(reply).map((limit) => `${limit.scope}:${limit.used_usd}`)).toEqual([
          "account:4.000000", // this month's spends; the wallet holds nothing (the session row was written here)
          "repository:6.500000", // today's 2.5 plus the 4 its open session holds
          "user:2.500000",
          "session:5.000000" // the largest open session: 4 held + 1 spent
        ])
        expect((yield* call("GET", LIMITS, { token: org.member.token })).body).toEqual(reply.body)
      }))
  })

  describe("GET /developer/account/spend", () => {
    /** A wallet with March 2026's totals, and some on either side of the month. */
    const march = Effect.gen(function*() {
      const org = yield* organisation
      const [r1, r2] = org.repositories
      const u1 = org.member.id
      const u2 = org.admin.id
      const walletId = yield* walletOf(org.admin.token)
      yield* seedTotals(walletId, [
        { day: "2026-02-28", repository_id: r1, user_id: u1, spent_usd: "50", sessions: 3 },
        { day: "2026-03-02", repository_id: r1, user_id: u1, spent_usd: "5", sessions: 2 },
        { day: "2026-03-02", repository_id: r2, user_id: u1, spent_usd: "1.5", unfunded_usd: "0.5" },
        { day: "2026-03-05", repository_id: r1, user_id: u2, spent_usd: "2.25" },
        { day: "2026-03-05", spent_usd: "0.75" },
        { day: "2026-03-31", repository_id: r2, user_id: u2, spent_usd: "4" },
        { day: "2026-04-01", repository_id: r1, user_id: u1, spent_usd: "100" }
      ])
      return { org, r1, r2, u1, u2 }
    })

    const group = (key: string | null, spent_usd: string, sessions: number, unfunded_usd = "0.000000") => ({
      key,
      keys: [key],
      spent_usd,
      unfunded_usd,
      sessions
    })

    const report = (token: string, query: string) => call("GET", `${SPEND}?${query}`, { token })

    it.effect("by repository and by user: largest spend first, null for the unattributed, total over all", () =>
      Effect.gen(function*() {
        const { org, r1, r2, u1, u2 } = yield* march
        const byRepository = yield* report(org.member.token, "group_by=repository&from=2026-03-01&to=2026-04-01")
        expect(byRepository.status).toBe(200)
        expect(byRepository.body).toEqual({
          from: "2026-03-01T00:00:00.000Z",
          to: "2026-04-01T00:00:00.000Z",
          group_by: "repository",
          groups: [group(r1, "7.250000", 3), group(r2, "5.500000", 2, "0.500000"), group(null, "0.750000", 1)],
          total: { spent_usd: "13.500000", unfunded_usd: "0.500000", sessions: 6 }
        })
        const byUser = yield* report(org.member.token, "group_by=user&from=2026-03-01&to=2026-04-01")
        expect(bodyOf(byUser).groups).toEqual([
          group(u1, "6.500000", 3, "0.500000"),
          group(u2, "6.250000", 2),
          group(null, "0.750000", 1)
        ])
      }))

    it.effect("by day and by month: in order; the window counts whole UTC days", () =>
      Effect.gen(function*() {
        const { org } = yield* march
        const byDay = yield* report(org.admin.token, "group_by=day&from=2026-03-01&to=2026-04-01")
        expect(bodyOf(byDay).groups).toEqual([
          group("2026-03-02", "6.500000", 3, "0.500000"),
          group("2026-03-05", "3.000000", 2),
          group("2026-03-31", "4.000000", 1)
        ])
        const byMonth = yield* report(org.admin.token, "group_by=month&from=2026-02-01&to=2026-05-01")
        expect(bodyOf(byMonth).groups).toEqual([
          group("2026-02", "50.000000", 3),
          group("2026-03", "13.500000", 6, "0.500000"),
          group("2026-04", "100.000000", 1)
        ])
        // Bounds inside a day take the whole day: 2 March to the end of 5 March (a date-time with an offset too).
        const partial = yield* report(
          org.admin.token,
          `group_by=day&from=2026-03-02T12:00:00Z&to=${encodeURIComponent("2026-03-05T23:30:00+01:00")}`
        )
        expect(bodyOf(partial)).toMatchObject({ from: "2026-03-02T00:00:00.000Z", to: "2026-03-06T00:00:00.000Z" })
        expect((bodyOf(partial).groups as ReadonlyArray<{ key: string }>).map((g) => g.key)).toEqual([
          "2026-03-02",
          "2026-03-05"
        ])
        // A UTC midnight as `to` is not moved: 31 March is outside.
        const exact = yield* report(org.admin.token, "group_by=day&from=2026-03-05&to=2026-03-31T00:00:00Z")
        expect((bodyOf(exact).groups as ReadonlyArray<{ key: string }>).map((g) => g.key)).toEqual(["2026-03-05"])
      }))

    it.effect("defaults: the current UTC month; one bound alone, a calendar month from or up to it", () =>
      Effect.gen(function*() {
        const { org } = yield* march
        const before = new Date()
        const current = yield* report(org.member.token, "group_by=repository")
        expect(current.status).toBe(200)
        const monthStart = new Date(Date.UTC(before.getUTCFullYear(), before.getUTCMonth(), 1)).toISOString()
        const nextMonth = new Date(Date.UTC(before.getUTCFullYear(), before.getUTCMonth() + 1, 1)).toISOString()
        if (new Date().getUTCMonth() === before.getUTCMonth()) {
          expect(bodyOf(current)).toMatchObject({ from: monthStart, to: nextMonth, groups: [] })
        }
        const fromOnly = yield* report(org.member.token, "group_by=day&from=2026-03-05")
        expect(bodyOf(fromOnly)).toMatchObject({ from: "2026-03-05T00:00:00.000Z", to: "2026-04-05T00:00:00.000Z" })
        expect((bodyOf(fromOnly).groups as ReadonlyArray<{ key: string }>).map((g) => g.key)).toEqual([
          "2026-03-05",
          "2026-03-31",
          "2026-04-01"
        ])
        const toOnly = yield* report(org.member.token, "group_by=month&to=2026-03-03")
        expect(bodyOf(toOnly)).toMatchObject({ from: "2026-02-03T00:00:00.000Z", to: "2026-03-03T00:00:00.000Z" })
        expect(bodyOf(toOnly).total).toEqual({ spent_usd: "56.500000", unfunded_usd: "0.500000", sessions: 6 })
      }))

    it.effect("an account without a wallet, or whose totals are elsewhere, reports nothing", () =>
      Effect.gen(function*() {
        yield* march
        const stranger = yield* signedInUser()
        const reply = yield* report(stranger.token, "group_by=user&from=2026-03-01&to=2026-04-01")
        expect(reply.body).toEqual({
          from: "2026-03-01T00:00:00.000Z",
          to: "2026-04-01T00:00:00.000Z",
          group_by: "user",
          groups: [],
          total: { spent_usd: "0.000000", unfunded_usd: "0.000000", sessions: 0 }
        })
      }))

    it.effect("at most 1,000 groups, the smallest left out; ties by key; the total counts every group", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const walletId = yield* walletOf(org.admin.token)
        const sql = yield* SqlClient.SqlClient
        // 1,002 repositories: one spent 0.5, two tie at 2, the rest spent 1 each.
        yield* sql`INSERT INTO settlement_spend_totals (wallet_id, day, repository_id, spent_usd, sessions)
                   SELECT ${walletId}, '2026-06-10', gen_random_uuid(), 1, 1 FROM generate_series(1, 999)`.pipe(
          Effect.orDie
        )
        const [low, tieA, tieB] = [
          "00000000-0000-4000-8000-000000000001",
          "ffffffff-0000-4000-8000-000000000000",
          "0fffffff-0000-4000-8000-000000000000"
        ]
        yield* seedTotals(walletId, [
          { day: "2026-06-11", repository_id: low, spent_usd: "0.5" },
          { day: "2026-06-11", repository_id: tieA, spent_usd: "2" },
          { day: "2026-06-12", repository_id: tieB, spent_usd: "2" }
        ])
        const reply = yield* report(org.member.token, "group_by=repository&from=2026-06-01&to=2026-07-01")
        const groups = bodyOf(reply).groups as ReadonlyArray<{ key: string; spent_usd: string }>
        expect(groups).toHaveLength(1000)
        expect(groups.slice(0, 2).map((g) => g.key)).toEqual([tieB, tieA])
        expect(groups.map((g) => g.key)).not.toContain(low)
        expect(bodyOf(reply).total).toEqual({ spent_usd: "1003.500000", unfunded_usd: "0.000000", sessions: 1002 })
      }))

    it.effect("422 validation_failed: group_by missing or unknown, a bound that is no date, to not after from, over 366 days", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["", "#/query/group_by"],
          ["group_by=repositories", "#/query/group_by"],
          ["group_by=week", "#/query/group_by"],
          ["group_by=day&from=2026-02-30", "#/query/from"],
          ["group_by=day&from=2026-13-01", "#/query/from"],
          ["group_by=day&from=yesterday", "#/query/from"],
          ["group_by=day&from=0000-01-01", "#/query/from"],
          ["group_by=day&to=2026-03-01T00:00:00", "#/query/to"],
          ["group_by=day&from=2026-03-01&to=2026-03-01", "#/query/to"],
          ["group_by=day&from=2026-03-02&to=2026-03-01T12:00:00Z", "#/query/to"],
          ["group_by=day&from=2026-01-01&to=2027-01-03", "#/query/to"]
        ]
        for (const [query, pointer] of cases) {
          const reply = yield* report(user.token, query)
          expect(reply.status, query).toBe(422)
          expect(reply.body).toMatchObject(problem(422, "validation_failed"))
          expect(pointers(reply), query).toEqual([pointer])
        }
        // A month past a bound stays within the years a bound can name.
        expect(bodyOf(yield* report(user.token, "group_by=day&from=9999-12-15"))).toMatchObject({
          from: "9999-12-15T00:00:00.000Z",
          to: "+010000-01-01T00:00:00.000Z",
          groups: []
        })
        expect(bodyOf(yield* report(user.token, "group_by=day&to=0001-01-15"))).toMatchObject({
          from: "0001-01-01T00:00:00.000Z",
          to: "0001-01-15T00:00:00.000Z"
        })
        // 366 days is the longest window, a leap year's whole.
        expect((yield* report(user.token, "group_by=month&from=2028-01-01&to=2029-01-01")).status).toBe(200)
      }))
  })
})
