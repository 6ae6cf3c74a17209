import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import {
  ACCOUNT_POLICY,
  createOrganisation,
  DEFAULTS,
  FIELDS,
  pointers,
  problem,
  putAccountPolicy,
  repositoryPolicy
} from "./support/policies.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

layer(TestApp(), { excludeTestServices: true })("account policy", (it) => {
  describe("authentication", () => {
    it.effect("every policy endpoint without a token is 401 unauthenticated", () =>
      Effect.gen(function*() {
        const someId = "0190a5d2-0000-7000-8000-000000000000"
        const replies = [
          yield* call("GET", "/developer/account/capabilities"),
          yield* call("GET", ACCOUNT_POLICY),
          yield* call("PUT", ACCOUNT_POLICY, { body: { policy: DEFAULTS } }),
          yield* call("GET", repositoryPolicy(someId)),
          yield* call("PUT", repositoryPolicy(someId), { body: { policy: {} } })
        ]
        for (const reply of replies) {
          expect(reply.status).toBe(401)
          expect(reply.headers["www-authenticate"]).toBe("Bearer")
          expect(reply.body).toMatchObject(problem(401, "unauthenticated"))
        }
      }))
  })

  describe("GET /developer/account/policy", () => {
    it.effect("before the first save it is version 0 with the safe defaults and updated_at null", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* call("GET", ACCOUNT_POLICY, { token: user.token })
        expect(reply.status).toBe(200)
        expect(reply.body).toEqual({
          scope: "account",
          scope_id: user.id,
          version: 0,
          policy: DEFAULTS,
          updated_at: null
        })
        // Fields come in the catalog's order, which clients may render as is.
        expect(Object.keys((reply.body as { policy: object }).policy)).toEqual(FIELDS)
      }))
  })

  describe("PUT /developer/account/policy", () => {
    it.effect("the first save, without expected_version, returns version 1 with the saved policy", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const policy = { ...DEFAULTS, force_push: "deny", package_installs: "allow" }
        const reply = yield* putAccountPolicy(user.token, policy)
        expect(reply.status).toBe(200)
        expect(reply.body).toEqual({
          scope: "account",
          scope_id: user.id,
          version: 1,
          policy,
          updated_at: expect.stringMatching(ISO_TIMESTAMP)
        })
        expect(Object.keys((reply.body as { policy: object }).policy)).toEqual(FIELDS)
        expect(yield* call("GET", ACCOUNT_POLICY, { token: user.token })).toMatchObject({
          status: 200,
          body: reply.body
        })
      }))

    it.effect("each save increments the version by one and moves updated_at", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const first = yield* putAccountPolicy(user.token, DEFAULTS, 0)
        expect(first.body).toMatchObject({ version: 1 })
        const second = yield* putAccountPolicy(user.token, { ...DEFAULTS, network: "deny" }, 1)
        expect(second.status).toBe(200)
        expect(second.body).toMatchObject({ version: 2, policy: { network: "deny" } })
        const third = yield* putAccountPolicy(user.token, { ...DEFAULTS, network: "deny" }, 2)
        expect(third.body).toMatchObject({ version: 3 })
        const times = [first, second, third].map((reply) =>
          Date.parse((reply.body as { updated_at: string }).updated_at)
        )
        expect(times[1]).toBeGreaterThanOrEqual(times[0] ?? 0)
        expect(times[2]).toBeGreaterThanOrEqual(times[1] ?? 0)
      }))

    it.effect("a stale expected_version is 409 version_conflict with the current version, and nothing changes", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putAccountPolicy(user.token, DEFAULTS)
        yield* putAccountPolicy(user.token, { ...DEFAULTS, force_push: "deny" }, 1)
        const stale = yield* putAccountPolicy(user.token, { ...DEFAULTS, force_push: "allow" }, 1)
        expect(stale.status).toBe(409)
        expect(stale.headers["content-type"]).toContain("application/problem+json")
        expect(stale.body).toEqual({
          type: "about:blank",
          title: "Conflict",
          status: 409,
          code: "version_conflict",
          detail: expect.any(String),
          current_version: 2
        })
        const current = yield* call("GET", ACCOUNT_POLICY, { token: user.token })
        expect(current.body).toMatchObject({ version: 2, policy: { force_push: "deny" } })
      }))

    it.effect("omitting expected_version once a policy is saved is 409: it means version 0", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putAccountPolicy(user.token, DEFAULTS)
        const again = yield* putAccountPolicy(user.token, DEFAULTS)
        expect(again.status).toBe(409)
        expect(again.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 1 })
      }))

    it.effect("an expected_version above 0 before anything is saved is 409 with current_version 0", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, DEFAULTS, 3)
        expect(reply.status).toBe(409)
        expect(reply.body).toMatchObject({ ...problem(409, "version_conflict"), current_version: 0 })
        expect((yield* call("GET", ACCOUNT_POLICY, { token: user.token })).body).toMatchObject({
          version: 0,
          updated_at: null
        })
      }))

    it.effect("values that are accepted but not yet effective are stored and returned", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const policy = {
          ...DEFAULTS,
          force_push: "allow",
          network: "deny",
          delivery_mode: "pull_request",
          unverified_delivery: "draft_pr",
          autonomy_ceiling: "pull_request",
          nightly_backlog_sweep: true
        }
        const reply = yield* putAccountPolicy(user.token, policy)
        expect(reply.status).toBe(200)
        expect((yield* call("GET", ACCOUNT_POLICY, { token: user.token })).body).toMatchObject({ version: 1, policy })
      }))
  })

  describe("PUT /developer/account/policy: validation (422)", () => {
    const withoutField = (field: string) =>
      Object.fromEntries(Object.entries(DEFAULTS).filter(([key]) => key !== field))

    it.effect("a missing field is 422 validation_failed pointing at it", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, withoutField("network"))
        expect(reply.status).toBe(422)
        expect(reply.body).toEqual({
          type: "about:blank",
          title: "Unprocessable Content",
          status: 422,
          code: "validation_failed",
          detail: expect.any(String),
          errors: [{ pointer: "#/policy/network", detail: "is required" }]
        })
      }))

    it.effect("a partial policy lists every missing field", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, { force_push: "deny" })
        expect(reply.status).toBe(422)
        expect(pointers(reply)).toEqual(
          FIELDS.filter((field) => field !== "force_push").map((f) => `#/policy/${f}`).sort()
        )
      }))

    it.effect("an unknown field, in the policy or beside it, is 422 and never silently dropped", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const inPolicy = yield* putAccountPolicy(user.token, { ...DEFAULTS, colour: "blue" })
        expect(inPolicy.status).toBe(422)
        expect(inPolicy.body).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#/policy/colour", detail: "is not a known field" }]
        })
        const beside = yield* call("PUT", ACCOUNT_POLICY, {
          token: user.token,
          body: { policy: DEFAULTS, force: true }
        })
        expect(beside.status).toBe(422)
        expect(pointers(beside)).toEqual(["#/force"])
      }))

    it.effect("a value of the wrong type is 422 at that field", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, {
          ...DEFAULTS,
          force_push: 1,
          nightly_backlog_sweep: "false",
          show_execution_rationale: null
        })
        expect(reply.status).toBe(422)
        expect(pointers(reply)).toEqual([
          "#/policy/force_push",
          "#/policy/nightly_backlog_sweep",
          "#/policy/show_execution_rationale"
        ])
      }))

    it.effect("a value that is not accepted is 422 naming the accepted ones", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, { ...DEFAULTS, force_push: "sometimes" })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#/policy/force_push", detail: "must be one of \"ask\", \"deny\", \"allow\"" }]
        })
      }))

    it.effect("run_tests_before_claim false is 422", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, { ...DEFAULTS, run_tests_before_claim: false })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#/policy/run_tests_before_claim", detail: "must be true" }]
        })
      }))

    it.effect("every offending field is listed at once", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const { deployment: _, ...policy } = DEFAULTS
        const reply = yield* call("PUT", ACCOUNT_POLICY, {
          token: user.token,
          body: {
            policy: { ...policy, force_push: "sometimes", run_tests_before_claim: false, network: 7, extra: 1 },
            expected_version: -1
          }
        })
        expect(reply.status).toBe(422)
        expect(pointers(reply)).toEqual([
          "#/expected_version",
          "#/policy/deployment",
          "#/policy/extra",
          "#/policy/force_push",
          "#/policy/network",
          "#/policy/run_tests_before_claim"
        ])
      }))

    it.effect("a missing or non-object policy is 422 at #/policy", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const body of [{}, { policy: null }, { policy: [] }, { policy: "ask" }]) {
          const reply = yield* call("PUT", ACCOUNT_POLICY, { token: user.token, body })
          expect(reply.status, JSON.stringify(body)).toBe(422)
          expect(pointers(reply)).toEqual(["#/policy"])
        }
      }))

    it.effect("expected_version that is not an integer from 0 to 2147483647 is 422", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const expected_version of [-1, 1.5, "1", null, 2_147_483_648, 1e20]) {
          const reply = yield* call("PUT", ACCOUNT_POLICY, {
            token: user.token,
            body: { policy: DEFAULTS, expected_version }
          })
          expect(reply.status, JSON.stringify(expected_version)).toBe(422)
          expect(reply.body).toMatchObject({
            errors: [{ pointer: "#/expected_version", detail: "must be an integer from 0 to 2147483647" }]
          })
        }
      }))

    it.effect("a body that is not JSON is 422 pointing at the whole body", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* call("PUT", ACCOUNT_POLICY, { token: user.token, rawBody: "{\"policy\":" })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#" }] })
      }))

    it.effect("a delivery_mode above autonomy_ceiling is 422 at delivery_mode", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, { ...DEFAULTS, delivery_mode: "pull_request" })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#/policy/delivery_mode", detail: expect.stringContaining("autonomy_ceiling") }]
        })
      }))

    it.effect("a lower autonomy_ceiling than both delivery fields is 422 at each of them", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, {
          ...DEFAULTS,
          delivery_mode: "draft_pr",
          unverified_delivery: "draft_pr",
          autonomy_ceiling: "preserve_only"
        })
        expect(reply.status).toBe(422)
        expect(pointers(reply)).toEqual(["#/policy/delivery_mode", "#/policy/unverified_delivery"])
      }))

    it.effect("delivery fields equal to the ceiling are accepted", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const policy = { ...DEFAULTS, delivery_mode: "draft_pr", unverified_delivery: "draft_pr" }
        expect((yield* putAccountPolicy(user.token, policy)).status).toBe(200)
      }))

    it.effect("an invalid body is checked before the version, and saves nothing", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putAccountPolicy(user.token, { ...DEFAULTS, delivery_mode: "pull_request" }, 9)
        expect(reply.status).toBe(422)
        expect((yield* call("GET", ACCOUNT_POLICY, { token: user.token })).body).toMatchObject({ version: 0 })
      }))
  })

  describe("accounts", () => {
    it.effect("members of one organisation share its policy; scope_id is the organisation", () =>
      Effect.gen(function*() {
        const organisationId = yield* createOrganisation()
        const ada = yield* signedInUser({ organisationId })
        const bob = yield* signedInUser({ organisationId })
        const saved = yield* putAccountPolicy(ada.token, { ...DEFAULTS, force_push: "deny" })
        expect(saved.body).toMatchObject({ scope: "account", scope_id: organisationId, version: 1 })
        expect((yield* call("GET", ACCOUNT_POLICY, { token: bob.token })).body).toEqual(saved.body)
        // Bob has not seen Ada's save: his write from version 0 is stale.
        const stale = yield* putAccountPolicy(bob.token, DEFAULTS)
        expect(stale.body).toMatchObject({ code: "version_conflict", current_version: 1 })
        expect((yield* putAccountPolicy(bob.token, DEFAULTS, 1)).body).toMatchObject({ version: 2 })
      }))

    it.effect("different accounts have separate policies", () =>
      Effect.gen(function*() {
        const organisationId = yield* createOrganisation()
        const member = yield* signedInUser({ organisationId })
        const loner = yield* signedInUser()
        yield* putAccountPolicy(member.token, { ...DEFAULTS, force_push: "deny" })
        expect((yield* call("GET", ACCOUNT_POLICY, { token: loner.token })).body).toMatchObject({
          scope_id: loner.id,
          version: 0,
          policy: DEFAULTS
        })
        expect((yield* putAccountPolicy(loner.token, DEFAULTS)).body).toMatchObject({ version: 1 })
      }))
  })

  describe("concurrent writers", () => {
    const race = (token: string, expectedVersion: number | undefined) =>
      Effect.all(
        Array.from({ length: 10 }, (_, i) =>
          putAccountPolicy(token, { ...DEFAULTS, network: i % 2 === 0 ? "allow" : "deny" }, expectedVersion)),
        { concurrency: "unbounded" }
      )

    it.effect("ten first saves at once: exactly one wins, nine get 409 with version 1", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const replies = yield* race(user.token, undefined)
        expect(replies.filter((reply) => reply.status === 200)).toHaveLength(1)
        const conflicts = replies.filter((reply) => reply.status === 409)
        expect(conflicts).toHaveLength(9)
        for (const reply of conflicts) {
          expect(reply.body).toMatchObject({ code: "version_conflict", current_version: 1 })
        }
        expect((yield* call("GET", ACCOUNT_POLICY, { token: user.token })).body).toMatchObject({ version: 1 })
      }))

    it.effect("ten saves from the same version at once: exactly one wins and the version moves by one", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        yield* putAccountPolicy(user.token, DEFAULTS)
        yield* putAccountPolicy(user.token, DEFAULTS, 1)
        const replies = yield* race(user.token, 2)
        const winners = replies.filter((reply) => reply.status === 200)
        expect(winners).toHaveLength(1)
        expect(replies.filter((reply) => reply.status === 409)).toHaveLength(9)
        const current = yield* call("GET", ACCOUNT_POLICY, { token: user.token })
        expect(current.body).toMatchObject({ version: 3 })
        expect((current.body as { policy: unknown }).policy).toEqual((winners[0]?.body as { policy: unknown }).policy)
      }))
  })
})
