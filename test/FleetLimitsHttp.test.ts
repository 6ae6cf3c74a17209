import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { setTimeout as sleep } from "node:timers/promises"
import { createOrganisation, createRepository, pointers, problem } from "./support/policies.js"
import { call, createUser, type Reply, signIn, TestApp } from "./support/TestApp.js"

/**
 * The limits of D19 over HTTP (docs/decisions/D19-fleet-controls.md): concurrency limits, the
 * label scope, warnings and temporary raises as the PUT takes them and the GET shows them, and
 * the `limits.updated` event each save writes. Sessions the settlement worker would open are
 * arranged here with SQL.
 */

const LIMITS = "/developer/account/limits"
const DAY_MS = 86_400_000

/** An organisation with an administrator, a member (both signed in) and a repository. */
const organisation = Effect.gen(function*() {
  const orgId = yield* createOrganisation(`Org ${randomUUID().slice(0, 8)}`)
  const admin = yield* createUser({ admin: true, organisationId: orgId })
  const member = yield* createUser({ organisationId: orgId })
  return {
    admin: { ...admin, token: yield* signIn(admin.email) },
    member: { ...member, token: yield* signIn(member.email) },
    repository: yield* createRepository(orgId)
  }
})

interface LimitAnswer {
  readonly id: string
  readonly scope: string
  readonly scope_id: string | null
  readonly period: string
  readonly window_minutes: number | null
  readonly amount_usd: string | null
  readonly effective_amount_usd: string | null
  readonly used_usd: string | null
  readonly warn_at_percent: ReadonlyArray<number>
  readonly raise: { readonly amount_usd: string; readonly until: string } | null
  readonly max_open_sessions: number | null
  readonly open_sessions: number | null
  readonly period_start: string | null
  readonly period_end: string | null
}

interface LimitsAnswer {
  readonly version: number
  readonly limits: ReadonlyArray<LimitAnswer>
  readonly updated_at: string | null
}

interface LimitsUpdated {
  readonly type: string
  readonly data: { readonly user_id: string; readonly version: number; readonly limits: ReadonlyArray<unknown> }
}

const putLimits = (token: string, body: unknown) => call("PUT", LIMITS, { token, body })

const saved = (reply: Reply) => {
  expect(reply.status, JSON.stringify(reply.body)).toBe(200)
  return reply.body as LimitsAnswer
}

const getLimits = (token: string) => Effect.map(call("GET", LIMITS, { token }), saved)

/** The account's `limits.updated` events, oldest first. */
const updates = (token: string) =>
  Effect.map(call("GET", "/developer/account/events?type=limits.updated&limit=500", { token }), (reply) => {
    expect(reply.status).toBe(200)
    return (reply.body as { events: ReadonlyArray<LimitsUpdated> }).events
  })

/** A limit as `limits.updated` lists it: the GET's record without its use. */
const withoutUse = (limit: LimitAnswer) => ({
  id: limit.id,
  scope: limit.scope,
  scope_id: limit.scope_id,
  period: limit.period,
  window_minutes: limit.window_minutes,
  amount_usd: limit.amount_usd,
  warn_at_percent: limit.warn_at_percent,
  raise: limit.raise,
  max_open_sessions: limit.max_open_sessions
})

/** The wallet's id, creating the wallet as its first read does. */
const walletOf = (token: string) =>
  Effect.map(call("GET", "/developer/account/wallet", { token }), (reply) => String((reply.body as { id: string }).id))

const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString()

/** A session as the settlement worker leaves it: open unless said otherwise, with its holds, spends and labels. */
const seedSession = (walletId: string, session: {
  readonly held: string
  readonly spent?: string
  readonly state?: "open" | "released"
  readonly repository_id?: string
  readonly labels?: Record<string, string>
}) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO settlement_sessions (wallet_id, session_id, held_usd, spent_usd, state, expires_at, repository_id, labels)
        VALUES (${walletId}, ${`s-${randomUUID()}`}, ${session.held}::numeric, ${session.spent ?? "0"}::numeric,
                ${session.state ?? "open"}::settlement_session_state, now() + interval '1 hour',
                ${session.repository_id ?? null},
                ${session.labels === undefined ? null : JSON.stringify(session.labels)}::jsonb)`
  ).pipe(Effect.orDie)

layer(TestApp(), { excludeTestServices: true, timeout: "120 seconds" })("limits of D19 over HTTP", (it) => {
  describe("PUT and GET", () => {
    it.effect("label, concurrency, warnings and a raise are saved and shown, every key in every limit, in order", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const until = new Date(Date.now() + 7 * DAY_MS).toISOString()
        const sent = [
          { scope: "label", scope_id: "team=Infra", period: "day", amount_usd: "5" },
          { scope: "label", scope_id: "team=infra", period: "concurrent", max_open_sessions: 4 },
          { scope: "label", scope_id: "team=infra", period: "day", amount_usd: "7", warn_at_percent: [1, 99] },
          { scope: "session", period: "session", amount_usd: "2", warn_at_percent: [90] },
          { scope: "repository", scope_id: org.repository, period: "concurrent", max_open_sessions: 100000 },
          { scope: "account", period: "concurrent", max_open_sessions: 1, warn_at_percent: [] },
          { scope: "user", scope_id: org.member.id, period: "week", amount_usd: "30" },
          {
            scope: "account",
            period: "month",
            amount_usd: "100",
            warn_at_percent: [10, 20, 50, 80, 95],
            raise: { amount_usd: "150.5", until }
          }
        ]
        const reply = saved(yield* putLimits(org.admin.token, { limits: sent }))
        expect(reply.version).toBe(1)
        // Listed by scope (label after user), then period (concurrent after month), then scope id.
        expect(reply.limits.map((limit) => `${limit.scope}/${limit.period}/${limit.scope_id ?? ""}`)).toEqual([
          "account/month/",
          "account/concurrent/",
          "repository/concurrent/" + org.repository,
          "user/week/" + org.member.id,
          "label/day/team=Infra",
          "label/day/team=infra",
          "label/concurrent/team=infra",
          "session/session/"
        ])
        const [month, concurrent] = reply.limits
        expect(month).toEqual({
          id: expect.stringMatching(/^[0-9a-f-]{36}$/),
          scope: "account",
          scope_id: null,
          period: "month",
          window_minutes: null,
          amount_usd: "100.000000",
          // The raise is what the limit enforces until its end.
          effective_amount_usd: "150.500000",
          used_usd: "0.000000",
          warn_at_percent: [10, 20, 50, 80, 95],
          raise: { amount_usd: "150.500000", until },
          max_open_sessions: null,
          open_sessions: null,
          period_start: expect.any(String),
          period_end: expect.any(String)
        })
        expect(concurrent).toEqual({
          id: expect.stringMatching(/^[0-9a-f-]{36}$/),
          scope: "account",
          scope_id: null,
          period: "concurrent",
          window_minutes: null,
          amount_usd: null,
          effective_amount_usd: null,
          used_usd: null,
          warn_at_percent: [],
          raise: null,
          max_open_sessions: 1,
          open_sessions: 0,
          period_start: null,
          period_end: null
        })
        const byKey = new Map(reply.limits.map((limit) => [`${limit.period}/${limit.scope_id ?? limit.scope}`, limit]))
        expect(byKey.get("day/team=infra")).toMatchObject({
          amount_usd: "7.000000",
          effective_amount_usd: "7.000000",
          used_usd: "0.000000",
          warn_at_percent: [1, 99],
          raise: null,
          open_sessions: null
        })
        expect(byKey.get("concurrent/team=infra")).toMatchObject({ max_open_sessions: 4, open_sessions: 0 })
        expect(byKey.get(`concurrent/${org.repository}`)).toMatchObject({ max_open_sessions: 100000 })
        expect(byKey.get("session/session")).toMatchObject({ warn_at_percent: [90], effective_amount_usd: "2.000000" })
        // A member reads the same.
        expect(yield* getLimits(org.member.token)).toEqual(reply)
      }))

    it.effect("a kept limit keeps its id and takes its new bound, warnings and raise", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const one = saved(
          yield* putLimits(org.admin.token, {
            limits: [
              { scope: "label", scope_id: "env=prod", period: "concurrent", max_open_sessions: 3 },
              {
                scope: "account",
                period: "day",
                amount_usd: "10",
                warn_at_percent: [50],
                raise: { amount_usd: "20", until: inSeconds(3600) }
              }
            ]
          })
        )
        const two = saved(
          yield* putLimits(org.admin.token, {
            limits: [
              { scope: "account", period: "day", amount_usd: "12", warn_at_percent: [80, 90] },
              { scope: "label", scope_id: "env=prod", period: "concurrent", max_open_sessions: 5 }
            ],
            expected_version: 1
          })
        )
        expect(two.limits.map((limit) => limit.id)).toEqual(one.limits.map((limit) => limit.id))
        expect(two.limits.map(({ amount_usd, effective_amount_usd, max_open_sessions, raise, warn_at_percent }) => ({
          amount_usd,
          effective_amount_usd,
          max_open_sessions,
          raise,
          warn_at_percent
        }))).toEqual([
          {
            amount_usd: "12.000000",
            effective_amount_usd: "12.000000",
            max_open_sessions: null,
            raise: null,
            warn_at_percent: [80, 90]
          },
          { amount_usd: null, effective_amount_usd: null, max_open_sessions: 5, raise: null, warn_at_percent: [] }
        ])
      }))

    it.effect("a raise ends by itself: once its until passes the GET shows the base, with no write", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const until = inSeconds(3)
        const reply = saved(
          yield* putLimits(org.admin.token, {
            limits: [{ scope: "account", period: "week", amount_usd: "40", raise: { amount_usd: "60", until } }]
          })
        )
        expect(reply.limits[0]?.effective_amount_usd).toBe("60.000000")
        yield* Effect.promise(() => sleep(Math.max(0, Date.parse(until) - Date.now()) + 500))
        const after = yield* getLimits(org.member.token)
        // The raise is still saved, as it was; only what it enforces changed.
        expect(after).toEqual({
          ...reply,
          limits: [{ ...reply.limits[0], effective_amount_usd: "40.000000" }]
        })
        expect((yield* updates(org.admin.token)).map((event) => event.data.version)).toEqual([1])
      }))
  })

  describe("use", () => {
    it.effect("open_sessions counts the open sessions in scope that hold or spent; a label limit counts its label's", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const walletId = yield* walletOf(org.admin.token)
        yield* seedSession(walletId, { held: "2", labels: { team: "infra", env: "prod" } })
        yield* seedSession(walletId, {
          held: "0",
          spent: "1.5",
          repository_id: org.repository,
          labels: { team: "infra" }
        })
        yield* seedSession(walletId, { held: "3", repository_id: org.repository, labels: { team: "web" } })
        // Neither counts: nothing held or spent yet, and closed.
        yield* seedSession(walletId, { held: "0", labels: { team: "infra" } })
        yield* seedSession(walletId, { held: "0", spent: "4", state: "released", labels: { team: "infra" } })
        const reply = saved(
          yield* putLimits(org.admin.token, {
            limits: [
              { scope: "account", period: "concurrent", max_open_sessions: 10 },
              { scope: "repository", scope_id: org.repository, period: "concurrent", max_open_sessions: 10 },
              { scope: "label", scope_id: "team=infra", period: "concurrent", max_open_sessions: 10 },
              { scope: "label", scope_id: "team=INFRA", period: "concurrent", max_open_sessions: 10 },
              { scope: "label", scope_id: "team=infra", period: "month", amount_usd: "100" }
            ]
          })
        )
        const use = new Map(reply.limits.map((limit) => [`${limit.scope_id ?? limit.scope}/${limit.period}`, limit]))
        expect(use.get("account/concurrent")?.open_sessions).toBe(3)
        expect(use.get(`${org.repository}/concurrent`)?.open_sessions).toBe(2)
        expect(use.get("team=infra/concurrent")?.open_sessions).toBe(2)
        expect(use.get("team=INFRA/concurrent")?.open_sessions).toBe(0)
        // The holds of the label's open sessions (no spends booked in the totals here).
        expect(use.get("team=infra/month")?.used_usd).toBe("2.000000")
      }))
  })

  describe("limits.updated", () => {
    it.effect("one per successful save, with the administrator, the version and the list; none for 403, 409 or 422", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const first = saved(
          yield* putLimits(org.admin.token, {
            limits: [
              { scope: "label", scope_id: "team=infra", period: "concurrent", max_open_sessions: 2 },
              {
                scope: "account",
                period: "month",
                amount_usd: "50",
                warn_at_percent: [75],
                raise: { amount_usd: "80", until: inSeconds(3600) }
              }
            ]
          })
        )
        // Refused: a member (403), a stale version (409), an invalid list (422).
        expect((yield* putLimits(org.member.token, { limits: [], expected_version: 1 })).status).toBe(403)
        expect((yield* putLimits(org.admin.token, { limits: [], expected_version: 0 })).status).toBe(409)
        expect(
          (yield* putLimits(org.admin.token, {
            limits: [{ scope: "label", scope_id: "Team=infra", period: "day", amount_usd: "1" }],
            expected_version: 1
          })).status
        ).toBe(422)
        const second = saved(yield* putLimits(org.admin.token, { limits: [], expected_version: 1 }))
        expect(second.version).toBe(2)
        const events = yield* updates(org.member.token)
        expect(events.map((event) => event.type)).toEqual(["limits.updated", "limits.updated"])
        expect(events.map((event) => event.data)).toEqual([
          { user_id: org.admin.id, version: 1, limits: first.limits.map(withoutUse) },
          { user_id: org.admin.id, version: 2, limits: [] }
        ])
      }))
  })

  describe("422 validation_failed at the field, the version and list unchanged, no event", () => {
    it.effect("labels, warnings, raises, concurrency bounds, fields where the kind takes none, duplicates", () =>
      Effect.gen(function*() {
        const org = yield* organisation
        const before = saved(
          yield* putLimits(org.admin.token, { limits: [{ scope: "account", period: "day", amount_usd: "100" }] })
        )
        const spend = { scope: "account", period: "month", amount_usd: "100" }
        const concurrent = { scope: "account", period: "concurrent", max_open_sessions: 3 }
        const label = (scope_id: unknown) => ({ scope: "label", scope_id, period: "day", amount_usd: "1" })
        const cases: ReadonlyArray<readonly [string, ReadonlyArray<unknown>, ReadonlyArray<string>]> = [
          // Labels: a key with capitals, not key=value, a key or value out of its rules, none at all.
          ["a label key with capitals", [label("Team=infra")], ["#/limits/0/scope_id"]],
          ["no '='", [label("team")], ["#/limits/0/scope_id"]],
          ["an empty key", [label("=infra")], ["#/limits/0/scope_id"]],
          ["an empty value", [label("team=")], ["#/limits/0/scope_id"]],
          ["a key of 41 characters", [label(`t${"e".repeat(40)}=x`)], ["#/limits/0/scope_id"]],
          ["a key starting with a digit", [label("1team=x")], ["#/limits/0/scope_id"]],
          ["a value of 101 characters", [label(`team=${"v".repeat(101)}`)], ["#/limits/0/scope_id"]],
          ["a control character in the value", [label("team=in\u0007fra")], ["#/limits/0/scope_id"]],
          ["a label limit without scope_id", [label(null)], ["#/limits/0/scope_id"]],
          ["a scope_id that is not a string", [label(5)], ["#/limits/0/scope_id"]],
          ["a repository limit naming a label", [{ ...label("team=infra"), scope: "repository" }], [
            "#/limits/0/scope_id"
          ]],
          // Warnings.
          ["warnings not ascending", [{ ...spend, warn_at_percent: [50, 40] }], ["#/limits/0/warn_at_percent"]],
          ["a warning twice", [{ ...spend, warn_at_percent: [50, 50] }], ["#/limits/0/warn_at_percent"]],
          ["a warning at 0", [{ ...spend, warn_at_percent: [0, 50] }], ["#/limits/0/warn_at_percent"]],
          ["a warning at 100", [{ ...spend, warn_at_percent: [50, 100] }], ["#/limits/0/warn_at_percent"]],
          ["six warnings", [{ ...spend, warn_at_percent: [1, 2, 3, 4, 5, 6] }], ["#/limits/0/warn_at_percent"]],
          ["a fraction", [{ ...spend, warn_at_percent: [50.5] }], ["#/limits/0/warn_at_percent"]],
          ["a string", [{ ...spend, warn_at_percent: ["50"] }], ["#/limits/0/warn_at_percent"]],
          ["not a list", [{ ...spend, warn_at_percent: 50 }], ["#/limits/0/warn_at_percent"]],
          // Raises.
          ["a raise at the base", [{ ...spend, raise: { amount_usd: "100", until: inSeconds(3600) } }], [
            "#/limits/0/raise/amount_usd"
          ]],
          ["a raise below the base", [{ ...spend, raise: { amount_usd: "99.999999", until: inSeconds(3600) } }], [
            "#/limits/0/raise/amount_usd"
          ]],
          ["a raise that ended", [{ ...spend, raise: { amount_usd: "150", until: inSeconds(-60) } }], [
            "#/limits/0/raise/until"
          ]],
          ["a raise beyond 90 days", [{ ...spend, raise: { amount_usd: "150", until: inSeconds(91 * 86_400) } }], [
            "#/limits/0/raise/until"
          ]],
          ["until without its zone", [{ ...spend, raise: { amount_usd: "150", until: "2099-01-01T00:00:00" } }], [
            "#/limits/0/raise/until"
          ]],
          ["until as a date", [{ ...spend, raise: { amount_usd: "150", until: "2099-01-01" } }], [
            "#/limits/0/raise/until"
          ]],
          ["a raise without until", [{ ...spend, raise: { amount_usd: "150" } }], ["#/limits/0/raise/until"]],
          ["a raise of nothing", [{ ...spend, raise: { amount_usd: "0", until: inSeconds(3600) } }], [
            "#/limits/0/raise/amount_usd"
          ]],
          ["a raise with more", [{ ...spend, raise: { amount_usd: "150", until: inSeconds(3600), note: "x" } }], [
            "#/limits/0/raise/note"
          ]],
          // Concurrency limits.
          ["max_open_sessions 0", [{ ...concurrent, max_open_sessions: 0 }], ["#/limits/0/max_open_sessions"]],
          ["max_open_sessions 100001", [{ ...concurrent, max_open_sessions: 100001 }], [
            "#/limits/0/max_open_sessions"
          ]],
          ["max_open_sessions 1.5", [{ ...concurrent, max_open_sessions: 1.5 }], ["#/limits/0/max_open_sessions"]],
          ["max_open_sessions as a string", [{ ...concurrent, max_open_sessions: "3" }], [
            "#/limits/0/max_open_sessions"
          ]],
          ["a concurrent limit without its bound", [{ scope: "account", period: "concurrent" }], [
            "#/limits/0/max_open_sessions"
          ]],
          ["amount_usd on a concurrent limit", [{ ...concurrent, amount_usd: "5" }], ["#/limits/0/amount_usd"]],
          ["warnings on a concurrent limit", [{ ...concurrent, warn_at_percent: [50] }], [
            "#/limits/0/warn_at_percent"
          ]],
          ["a raise on a concurrent limit", [{ ...concurrent, raise: { amount_usd: "5", until: inSeconds(3600) } }], [
            "#/limits/0/raise"
          ]],
          ["concurrent with scope session", [{ scope: "session", period: "concurrent", max_open_sessions: 3 }], [
            "#/limits/0/period"
          ]],
          ["max_open_sessions on a spend limit", [{ ...spend, max_open_sessions: 3 }], [
            "#/limits/0/max_open_sessions"
          ]],
          ["a spend limit without its amount", [{ scope: "account", period: "week" }], ["#/limits/0/amount_usd"]],
          // Optional means absent: null is not "none".
          ["amount_usd null", [{ ...spend, amount_usd: null }], ["#/limits/0/amount_usd"]],
          ["raise null", [{ ...spend, raise: null }], ["#/limits/0/raise"]],
          ["max_open_sessions null", [{ ...concurrent, max_open_sessions: null }], ["#/limits/0/max_open_sessions"]],
          // Duplicates: a label compared exactly, a concurrent limit by its scope and scope id.
          ["a label twice", [label("team=infra"), label("team=infra")], ["#/limits/1"]],
          ["a concurrent limit twice", [concurrent, { ...concurrent, max_open_sessions: 4 }], ["#/limits/1"]],
          ["a repository's concurrent limit twice, in two cases", [
            { scope: "repository", scope_id: org.repository, period: "concurrent", max_open_sessions: 1 },
            { scope: "repository", scope_id: org.repository.toUpperCase(), period: "concurrent", max_open_sessions: 2 }
          ], ["#/limits/1"]],
          // Every offending field at once: of the values' forms, then of the rules between fields.
          ["several forms", [{ ...concurrent, max_open_sessions: 0 }, { ...spend, warn_at_percent: [9, 1] }], [
            "#/limits/0/max_open_sessions",
            "#/limits/1/warn_at_percent"
          ]],
          ["several rules", [
            label("Team=x"),
            { ...concurrent, amount_usd: "1" },
            { ...spend, raise: { amount_usd: "50", until: inSeconds(-1) } }
          ], ["#/limits/0/scope_id", "#/limits/1/amount_usd", "#/limits/2/raise/amount_usd", "#/limits/2/raise/until"]]
        ]
        for (const [name, limits, expected] of cases) {
          const reply = yield* putLimits(org.admin.token, { limits, expected_version: 1 })
          expect(reply.status, `${name}: ${JSON.stringify(reply.body)}`).toBe(422)
          expect(reply.body, name).toMatchObject(problem(422, "validation_failed"))
          expect(pointers(reply), name).toEqual([...expected].sort())
        }
        const after = yield* getLimits(org.admin.token)
        expect(after).toEqual(before)
        expect((yield* updates(org.admin.token)).map((event) => event.data.version)).toEqual([1])
      }))
  })
})
