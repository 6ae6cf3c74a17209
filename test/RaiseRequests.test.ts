import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { createOrganisation, pointers, problem } from "./support/policies.js"
import { call, createUser, type Reply, signIn, TestApp } from "./support/TestApp.js"

/**
 * Limit raise requests over HTTP (D22, docs/decisions/D22-limits-where-people-live.md#raise-requests):
 * a member asks for a temporary raise of a spend limit, an administrator approves it (the limit's
 * D19 raise, its version and `limits.updated` as a PUT would write them) or declines it; what is
 * refused writes nothing.
 */

const LIMITS = "/developer/account/limits"
const REQUESTS = "/developer/account/limits/raise-requests"
const DAY_MS = 86_400_000

interface LimitAnswer {
  readonly id: string
  readonly scope: string
  readonly period: string
  readonly amount_usd: string | null
  readonly effective_amount_usd: string | null
  readonly raise: { readonly amount_usd: string; readonly until: string } | null
}

interface LimitsAnswer {
  readonly version: number
  readonly limits: ReadonlyArray<LimitAnswer>
}

interface RequestAnswer {
  readonly id: string
  readonly state: "pending" | "approved" | "declined"
  readonly limit_id: string | null
  readonly amount_usd: string
  readonly until: string
  readonly reason: string
  readonly requested_by: string
  readonly created_at: string
  readonly decided_by?: string
  readonly decided_at?: string
  readonly approved_amount_usd?: string
  readonly approved_until?: string
  readonly decline_reason?: string | null
}

interface EventAnswer {
  readonly type: string
  readonly data: Record<string, unknown>
}

const inDays = (days: number) => new Date(Date.now() + days * DAY_MS).toISOString()

/** An organisation with two administrators and two members, all signed in, and its limits saved. */
const organisation = Effect.gen(function*() {
  const orgId = yield* createOrganisation(`Org ${randomUUID().slice(0, 8)}`)
  const person = (admin: boolean) =>
    Effect.flatMap(
      createUser({ admin, organisationId: orgId }),
      (user) => Effect.map(signIn(user.email), (token) => ({ ...user, token }))
    )
  const admin = yield* person(true)
  const otherAdmin = yield* person(true)
  const member = yield* person(false)
  const otherMember = yield* person(false)
  const saved = yield* call("PUT", LIMITS, {
    token: admin.token,
    body: {
      limits: [
        { scope: "account", period: "month", amount_usd: "100" },
        { scope: "account", period: "concurrent", max_open_sessions: 5 },
        { scope: "user", scope_id: member.id, period: "day", amount_usd: "10" },
        { scope: "session", period: "session", amount_usd: "5" }
      ]
    }
  })
  expect(saved.status, JSON.stringify(saved.body)).toBe(200)
  const limits = (saved.body as LimitsAnswer).limits
  const limitOf = (period: string) => limits.find((limit) => limit.period === period)?.id ?? ""
  return {
    orgId,
    admin,
    otherAdmin,
    member,
    otherMember,
    month: limitOf("month"),
    concurrent: limitOf("concurrent"),
    day: limitOf("day"),
    session: limitOf("session")
  }
})

const ask = (token: string, body: unknown) => call("POST", REQUESTS, { token, body })
const approve = (token: string, id: string, body?: unknown) =>
  call("POST", `${REQUESTS}/${id}/approve`, { token, ...(body === undefined ? {} : { body }) })
const decline = (token: string, id: string, body?: unknown) =>
  call("POST", `${REQUESTS}/${id}/decline`, { token, ...(body === undefined ? {} : { body }) })

const created = (reply: Reply) => {
  expect(reply.status, JSON.stringify(reply.body)).toBe(201)
  return reply.body as RequestAnswer
}

const ok = (reply: Reply) => {
  expect(reply.status, JSON.stringify(reply.body)).toBe(200)
  return reply.body as RequestAnswer
}

const listed = (token: string, state?: string) =>
  Effect.map(call("GET", state === undefined ? REQUESTS : `${REQUESTS}?state=${state}`, { token }), (reply) => {
    expect(reply.status, JSON.stringify(reply.body)).toBe(200)
    return (reply.body as { requests: ReadonlyArray<RequestAnswer> }).requests
  })

const getLimits = (token: string) =>
  Effect.map(call("GET", LIMITS, { token }), (reply) => {
    expect(reply.status).toBe(200)
    return reply.body as LimitsAnswer
  })

/** The account's events of these types, oldest first. */
const eventsOf = (token: string, types: ReadonlyArray<string>) =>
  Effect.map(call("GET", "/developer/account/events?limit=500", { token }), (reply) => {
    expect(reply.status).toBe(200)
    return (reply.body as { events: ReadonlyArray<EventAnswer> }).events.filter((event) => types.includes(event.type))
  })

const EVENT_TYPES = ["limit.raise_requested", "limit.raise_decided", "limits.updated"]

/** What an account has written of requests, limits and events: the same before and after a refusal. */
const written = (orgId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ requests: number; decided: number; version: number; events: number }>`
      SELECT
        (SELECT count(*)::integer FROM limit_raise_requests WHERE account_id = ${orgId}) AS requests,
        (SELECT count(*)::integer FROM limit_raise_requests WHERE account_id = ${orgId} AND state <> 'pending')
          AS decided,
        (SELECT version FROM spend_limit_sets WHERE account_id = ${orgId}) AS version,
        (SELECT count(*)::integer FROM account_events WHERE account_id = ${orgId}) AS events`
    if (row === undefined) return yield* Effect.dieMessage("no row")
    return row
  }).pipe(Effect.orDie)

layer(TestApp(), { excludeTestServices: true, timeout: "120 seconds" })("limit raise requests (D22)", (it) => {
  it.effect("a member asks, an administrator lists and approves it for less: the limit shows the raise, the events are written", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const until = inDays(14)
      const before = Date.now()
      const request = created(
        yield* ask(org.member.token, { limit_id: org.month, amount_usd: "250", until, reason: "load tests this week" })
      )
      expect(request).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        state: "pending",
        limit_id: org.month,
        amount_usd: "250.000000",
        until,
        reason: "load tests this week",
        requested_by: org.member.id,
        created_at: expect.any(String)
      })
      expect(Date.parse(request.created_at)).toBeGreaterThanOrEqual(before - 1000)

      // The administrator sees it; pending is the default.
      expect(yield* listed(org.admin.token)).toEqual([request])
      expect(yield* listed(org.admin.token, "pending")).toEqual([request])
      expect(yield* listed(org.admin.token, "decided")).toEqual([])

      const versionBefore = (yield* getLimits(org.admin.token)).version
      const approvedUntil = inDays(7)
      const approved = ok(yield* approve(org.admin.token, request.id, { amount_usd: "200", until: approvedUntil }))
      expect(approved).toEqual({
        ...request,
        state: "approved",
        decided_by: org.admin.id,
        decided_at: expect.any(String),
        approved_amount_usd: "200.000000",
        approved_until: approvedUntil
      })

      const limits = yield* getLimits(org.member.token)
      expect(limits.version).toBe(versionBefore + 1)
      expect(limits.limits.find((limit) => limit.id === org.month)).toMatchObject({
        amount_usd: "100.000000",
        effective_amount_usd: "200.000000",
        raise: { amount_usd: "200.000000", until: approvedUntil }
      })
      // The other limits are as they were.
      expect(limits.limits.find((limit) => limit.id === org.day)).toMatchObject({ raise: null })

      expect(yield* listed(org.admin.token)).toEqual([])
      expect(yield* listed(org.admin.token, "decided")).toEqual([approved])
      expect(yield* listed(org.member.token, "all")).toEqual([approved])

      const events = yield* eventsOf(org.member.token, EVENT_TYPES)
      expect(events.map((event) => event.type)).toEqual([
        "limits.updated",
        "limit.raise_requested",
        "limits.updated",
        "limit.raise_decided"
      ])
      expect(events[1]?.data).toEqual({ request })
      expect(events[2]?.data).toEqual({
        user_id: org.admin.id,
        version: versionBefore + 1,
        limits: expect.arrayContaining([
          expect.objectContaining({ id: org.month, raise: { amount_usd: "200.000000", until: approvedUntil } })
        ])
      })
      expect(events[3]?.data).toEqual({ decision: "approved", request: approved })
    }))

  it.effect("approved as asked when the body is left out; a session limit takes a raise too", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const until = inDays(3)
      const request = created(
        yield* ask(org.member.token, { limit_id: org.session, amount_usd: "7.5", until, reason: "a long refactor" })
      )
      const approved = ok(yield* approve(org.admin.token, request.id))
      expect(approved).toMatchObject({ state: "approved", approved_amount_usd: "7.500000", approved_until: until })
      expect((yield* getLimits(org.admin.token)).limits.find((limit) => limit.id === org.session)).toMatchObject({
        effective_amount_usd: "7.500000",
        raise: { amount_usd: "7.500000", until }
      })
    }))

  it.effect("an administrator declines, with or without a reason: the limit is left as it was", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const body = { limit_id: org.day, amount_usd: "20", until: inDays(2), reason: "a release" }
      const first = created(yield* ask(org.member.token, body))
      const second = created(yield* ask(org.member.token, body))
      const version = (yield* getLimits(org.admin.token)).version
      const declined = ok(yield* decline(org.admin.token, first.id, { reason: "not this month" }))
      expect(declined).toEqual({
        ...first,
        state: "declined",
        decided_by: org.admin.id,
        decided_at: expect.any(String),
        decline_reason: "not this month"
      })
      expect(ok(yield* decline(org.otherAdmin.token, second.id))).toMatchObject({
        state: "declined",
        decided_by: org.otherAdmin.id,
        decline_reason: null
      })
      const limits = yield* getLimits(org.admin.token)
      expect(limits.version).toBe(version)
      expect(limits.limits.find((limit) => limit.id === org.day)).toMatchObject({ raise: null })
      const decided = (yield* eventsOf(org.admin.token, ["limit.raise_decided"])).map((event) => event.data)
      expect(decided).toEqual([{ decision: "declined", request: declined }, {
        decision: "declined",
        request: expect.objectContaining({ id: second.id, decline_reason: null })
      }])
      // Newest first.
      expect((yield* listed(org.admin.token, "decided")).map((request) => request.id)).toEqual([second.id, first.id])
    }))

  it.effect("every refused request is 422 at its field and writes nothing", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const good = { limit_id: org.month, amount_usd: "150", until: inDays(10), reason: "a demo" }
      const before = yield* written(org.orgId)
      const cases: ReadonlyArray<readonly [Record<string, unknown>, ReadonlyArray<string>]> = [
        [{ ...good, limit_id: randomUUID() }, ["#/limit_id"]],
        [{ ...good, limit_id: "not-a-limit" }, ["#/limit_id"]],
        [{ ...good, limit_id: org.concurrent }, ["#/limit_id"]],
        [{ ...good, amount_usd: "100" }, ["#/amount_usd"]],
        [{ ...good, amount_usd: "99.999999" }, ["#/amount_usd"]],
        [{ ...good, amount_usd: "0" }, ["#/amount_usd"]],
        [{ ...good, amount_usd: "150.1234567" }, ["#/amount_usd"]],
        [{ ...good, until: inDays(-1) }, ["#/until"]],
        [{ ...good, until: new Date(Date.now() + 90 * DAY_MS + 60_000).toISOString() }, ["#/until"]],
        [{ ...good, until: "2026-02-30T00:00:00Z" }, ["#/until"]],
        [{ ...good, until: "next week" }, ["#/until"]],
        [{ ...good, reason: "" }, ["#/reason"]],
        [{ ...good, reason: "x".repeat(501) }, ["#/reason"]],
        [{ ...good, reason: undefined }, ["#/reason"]],
        [{ ...good, extra: true }, ["#/extra"]],
        // Every offending field at once.
        [{ ...good, amount_usd: "50", until: inDays(-2) }, ["#/amount_usd", "#/until"]]
      ]
      for (const [body, expected] of cases) {
        const reply = yield* ask(org.member.token, body)
        expect(reply.status, JSON.stringify(body)).toBe(422)
        expect(reply.body).toMatchObject(problem(422, "validation_failed"))
        expect(pointers(reply), JSON.stringify(body)).toEqual(expected)
      }
      expect(yield* written(org.orgId)).toEqual(before)
      // Just within the bounds: 500 characters (of any plane), 90 days ahead, a cent above the amount.
      created(yield* ask(org.member.token, { ...good, amount_usd: "100.01", reason: "\u{1F680}".repeat(500) }))
      created(
        yield* ask(org.member.token, { ...good, until: new Date(Date.now() + 90 * DAY_MS - 60_000).toISOString() })
      )

      // Approving is held to what was asked and to the limit.
      const request = created(yield* ask(org.member.token, good))
      const approving = yield* written(org.orgId)
      const refusals: ReadonlyArray<readonly [Record<string, unknown>, ReadonlyArray<string>]> = [
        [{ amount_usd: "150.000001" }, ["#/amount_usd"]],
        [{ amount_usd: "100" }, ["#/amount_usd"]],
        [{ until: new Date(Date.parse(good.until) + 1000).toISOString() }, ["#/until"]],
        [{ until: inDays(-1) }, ["#/until"]],
        [{ until: "tomorrow" }, ["#/until"]],
        [{ amount_usd: "-1" }, ["#/amount_usd"]],
        [{ reason: "no" }, ["#/reason"]]
      ]
      for (const [body, expected] of refusals) {
        const reply = yield* approve(org.admin.token, request.id, body)
        expect(reply.status, JSON.stringify(body)).toBe(422)
        expect(pointers(reply), JSON.stringify(body)).toEqual(expected)
      }
      for (const body of [{ reason: "" }, { reason: "x".repeat(501) }, { amount_usd: "1" }]) {
        const reply = yield* decline(org.admin.token, request.id, body)
        expect(reply.status, JSON.stringify(body)).toBe(422)
      }
      // A PUT that raised the limit's own amount past what was asked: approving as asked is not a raise.
      const limits = yield* getLimits(org.admin.token)
      const saved = yield* call("PUT", LIMITS, {
        token: org.admin.token,
        body: {
          expected_version: limits.version,
          limits: [
            { scope: "account", period: "month", amount_usd: "200" },
            { scope: "account", period: "concurrent", max_open_sessions: 5 },
            { scope: "user", scope_id: org.member.id, period: "day", amount_usd: "10" },
            { scope: "session", period: "session", amount_usd: "5" }
          ]
        }
      })
      expect(saved.status).toBe(200)
      const afterPut = yield* written(org.orgId)
      expect(afterPut).toEqual({ ...approving, version: approving.version + 1, events: approving.events + 1 })
      const notAbove = yield* approve(org.admin.token, request.id)
      expect(notAbove.status).toBe(422)
      expect(pointers(notAbove)).toEqual(["#/amount_usd"])
      expect(yield* written(org.orgId)).toEqual(afterPut)
      expect((yield* listed(org.admin.token)).find((one) => one.id === request.id)?.state).toBe("pending")
    }))

  it.effect("at most 20 pending per account: the 21st is 409 too_many_pending_requests, until one is decided", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const body = { limit_id: org.month, amount_usd: "120", until: inDays(5), reason: "more" }
      const made: Array<RequestAnswer> = []
      for (let i = 0; i < 20; i++) {
        made.push(created(yield* ask(i % 2 === 0 ? org.member.token : org.otherMember.token, body)))
      }
      const before = yield* written(org.orgId)
      const refused = yield* ask(org.admin.token, body)
      expect(refused.status).toBe(409)
      expect(refused.body).toMatchObject({ ...problem(409, "too_many_pending_requests"), limit: 20 })
      expect(yield* written(org.orgId)).toEqual(before)
      // Bad input is still told as bad input.
      expect((yield* ask(org.admin.token, { ...body, amount_usd: "1" })).status).toBe(422)
      const first = made[0]
      if (first === undefined) return expect.unreachable()
      ok(yield* decline(org.admin.token, first.id))
      created(yield* ask(org.admin.token, body))
      expect((yield* ask(org.admin.token, body)).status).toBe(409)
    }))

  it.effect("a member sees only their own requests; an administrator sees every one, newest first", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const body = { limit_id: org.month, amount_usd: "120", until: inDays(5), reason: "mine" }
      const a = created(yield* ask(org.member.token, body))
      const b = created(yield* ask(org.otherMember.token, body))
      const c = created(yield* ask(org.member.token, body))
      const d = created(yield* ask(org.admin.token, body))
      ok(yield* decline(org.admin.token, c.id))
      expect((yield* listed(org.member.token)).map((r) => r.id)).toEqual([a.id])
      expect((yield* listed(org.member.token, "all")).map((r) => r.id)).toEqual([c.id, a.id])
      expect((yield* listed(org.member.token, "decided")).map((r) => r.id)).toEqual([c.id])
      expect((yield* listed(org.otherMember.token, "all")).map((r) => r.id)).toEqual([b.id])
      expect((yield* listed(org.admin.token, "all")).map((r) => r.id)).toEqual([d.id, c.id, b.id, a.id])
      expect((yield* listed(org.otherAdmin.token)).map((r) => r.id)).toEqual([d.id, b.id, a.id])
      const bad = yield* call("GET", `${REQUESTS}?state=open`, { token: org.admin.token })
      expect(bad.status).toBe(422)
      expect(pointers(bad)).toEqual(["#/query/state"])
    }))

  it.effect("a member cannot approve or decline (403, before the body is read); nothing changes", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const request = created(
        yield* ask(org.member.token, { limit_id: org.month, amount_usd: "120", until: inDays(5), reason: "please" })
      )
      const before = yield* written(org.orgId)
      for (
        const reply of [
          yield* approve(org.member.token, request.id),
          yield* approve(org.member.token, request.id, { amount_usd: "not an amount" }),
          yield* approve(org.otherMember.token, randomUUID()),
          yield* decline(org.member.token, request.id, { reason: "" })
        ]
      ) {
        expect(reply.status).toBe(403)
        expect(reply.body).toMatchObject(problem(403, "forbidden"))
      }
      expect(yield* written(org.orgId)).toEqual(before)
    }))

  it.effect("two administrators approving at once: one 200, one 409 raise_request_decided, one version bump", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      for (let round = 0; round < 3; round++) {
        const request = created(
          yield* ask(org.member.token, { limit_id: org.month, amount_usd: "300", until: inDays(9), reason: "race" })
        )
        const before = yield* written(org.orgId)
        const replies = yield* Effect.all([
          approve(org.admin.token, request.id, { amount_usd: "250" }),
          approve(org.otherAdmin.token, request.id, { amount_usd: "260" })
        ], { concurrency: "unbounded" })
        expect(replies.map((reply) => reply.status).sort()).toEqual([200, 409])
        const winner = replies.find((reply) => reply.status === 200)?.body as RequestAnswer
        const loser = replies.find((reply) => reply.status === 409)
        expect(loser?.body).toMatchObject({ ...problem(409, "raise_request_decided"), state: "approved" })
        const after = yield* written(org.orgId)
        // One version, one limits.updated and one limit.raise_decided.
        expect(after).toEqual({
          ...before,
          decided: before.decided + 1,
          version: before.version + 1,
          events: before.events + 2
        })
        expect((yield* getLimits(org.admin.token)).limits.find((limit) => limit.id === org.month)?.raise?.amount_usd)
          .toBe(winner.approved_amount_usd)
      }
    }))

  it.effect("a decided request is 409 raise_request_decided on approve and decline", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const body = { limit_id: org.month, amount_usd: "120", until: inDays(5), reason: "once" }
      const declined = created(yield* ask(org.member.token, body))
      ok(yield* decline(org.admin.token, declined.id))
      const approved = created(yield* ask(org.member.token, body))
      ok(yield* approve(org.admin.token, approved.id))
      const before = yield* written(org.orgId)
      const cases = [
        [yield* approve(org.admin.token, declined.id), "declined"],
        [yield* approve(org.otherAdmin.token, declined.id, { amount_usd: "110" }), "declined"],
        [yield* decline(org.admin.token, declined.id), "declined"],
        [yield* approve(org.admin.token, approved.id), "approved"],
        [yield* decline(org.admin.token, approved.id, { reason: "too late" }), "approved"]
      ] as const
      for (const [reply, state] of cases) {
        expect(reply.status).toBe(409)
        expect(reply.body).toMatchObject({ ...problem(409, "raise_request_decided"), state })
      }
      expect(yield* written(org.orgId)).toEqual(before)
    }))

  it.effect("a request whose limit a PUT removed shows limit_id null, and approving it is 409 limit_not_found", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const request = created(
        yield* ask(org.member.token, { limit_id: org.day, amount_usd: "30", until: inDays(5), reason: "gone soon" })
      )
      const limits = yield* getLimits(org.admin.token)
      const saved = yield* call("PUT", LIMITS, {
        token: org.admin.token,
        body: { expected_version: limits.version, limits: [{ scope: "account", period: "month", amount_usd: "100" }] }
      })
      expect(saved.status).toBe(200)
      const [shown] = yield* listed(org.admin.token)
      expect(shown).toEqual({ ...request, limit_id: null })
      const before = yield* written(org.orgId)
      const reply = yield* approve(org.admin.token, request.id)
      expect(reply.status).toBe(409)
      expect(reply.body).toMatchObject(problem(409, "limit_not_found"))
      expect(yield* written(org.orgId)).toEqual(before)
      // It can still be declined.
      expect(ok(yield* decline(org.admin.token, request.id))).toMatchObject({ state: "declined", limit_id: null })
    }))

  it.effect("an unknown id, or another account's, is 404 raise_request_not_found", () =>
    Effect.gen(function*() {
      const org = yield* organisation
      const other = yield* organisation
      const theirs = created(
        yield* ask(other.member.token, { limit_id: other.month, amount_usd: "120", until: inDays(5), reason: "x" })
      )
      // Another account's limit is no limit of this one.
      const foreign = yield* ask(org.member.token, {
        limit_id: other.month,
        amount_usd: "120",
        until: inDays(5),
        reason: "x"
      })
      expect(foreign.status).toBe(422)
      expect(pointers(foreign)).toEqual(["#/limit_id"])
      for (const id of [theirs.id, randomUUID(), "not-an-id"]) {
        for (const reply of [yield* approve(org.admin.token, id), yield* decline(org.admin.token, id)]) {
          expect(reply.status, id).toBe(404)
          expect(reply.body).toMatchObject(problem(404, "raise_request_not_found"))
        }
      }
      expect((yield* listed(other.admin.token)).map((r) => r.state)).toEqual(["pending"])
      expect(yield* listed(org.admin.token, "all")).toEqual([])
    }))

  it.effect("without a token every endpoint is 401", () =>
    Effect.gen(function*() {
      for (
        const reply of [
          yield* call("GET", REQUESTS),
          yield* call("POST", REQUESTS, { body: {} }),
          yield* call("POST", `${REQUESTS}/${randomUUID()}/approve`),
          yield* call("POST", `${REQUESTS}/${randomUUID()}/decline`)
        ]
      ) {
        expect(reply.status).toBe(401)
      }
    }))
})
