import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import {
  createOrganisation,
  createRepository,
  DEFAULTS,
  pointers,
  problem,
  putAccountPolicy,
  putOverride,
  repositoryPolicy,
  sourcesAll
} from "./support/policies.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"

interface RepositoryPolicy {
  readonly repository_id: string
  readonly override:
    | { readonly scope: string; readonly version: number; readonly policy: Record<string, unknown> }
    | null
  readonly effective: {
    readonly scope: string
    readonly policy: Record<string, unknown>
    readonly sources: Record<string, string>
    readonly capped: ReadonlyArray<string>
  }
}

const record = (body: unknown) => body as RepositoryPolicy

/** A signed-in user of their own account with one repository. */
const userWithRepository = Effect.gen(function*() {
  const user = yield* signedInUser()
  return { ...user, repositoryId: yield* createRepository(user.id) }
})

layer(TestApp(), { excludeTestServices: true })("repository policy", (it) => {
  describe("GET /developer/account/repositories/{repository_id}/policy", () => {
    it.effect("an id of any length or shape is 404 repository_not_found, never a route's not_found (D3)", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const id of ["x".repeat(101), "0".repeat(2_000), "not-a-uuid", "%00"]) {
          for (const method of ["GET", "PUT"] as const) {
            const reply = yield* call(method, repositoryPolicy(id), { token: user.token, body: { policy: {} } })
            expect(reply.status, `${method} ${id.length}`).toBe(404)
            expect(reply.body, `${method} ${id.length}`).toMatchObject({ code: "repository_not_found" })
          }
        }
      }))

    it.effect("a repository without an override inherits the defaults while the account has saved nothing", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const reply = yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })
        expect(reply.status).toBe(200)
        expect(reply.body).toEqual({
          repository_id: user.repositoryId,
          override: null,
          effective: { scope: "effective", policy: DEFAULTS, sources: sourcesAll("default"), capped: [] }
        })
      }))

    it.effect("once the account saves, the effective policy is the account's and says so", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const policy = { ...DEFAULTS, force_push: "deny", network: "allow" }
        yield* putAccountPolicy(user.token, policy)
        const reply = yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })
        expect(record(reply.body).effective).toEqual({
          scope: "effective",
          policy,
          sources: sourcesAll("account"),
          capped: []
        })
      }))
  })

  describe("PUT /developer/account/repositories/{repository_id}/policy", () => {
    it.effect("a sparse override is merged over the account policy, its fields sourced from the repository", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const reply = yield* putOverride(user.token, user.repositoryId, { network: "allow", force_push: "deny" })
        expect(reply.status).toBe(200)
        expect(reply.body).toEqual({
          repository_id: user.repositoryId,
          override: { scope: "repository", version: 1, policy: { force_push: "deny", network: "allow" } },
          effective: {
            scope: "effective",
            policy: { ...DEFAULTS, force_push: "deny", network: "allow" },
            sources: { ...sourcesAll("default"), force_push: "repository", network: "repository" },
            capped: []
          }
        })
        expect((yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })).body).toEqual(
          reply.body
        )
      }))

    it.effect("a write replaces the whole override and increments its version", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putAccountPolicy(user.token, { ...DEFAULTS, package_installs: "deny" })
        yield* putOverride(user.token, user.repositoryId, { force_push: "deny", network: "allow" })
        const reply = yield* putOverride(user.token, user.repositoryId, { package_installs: "allow" }, 1)
        expect(reply.status).toBe(200)
        const body = record(reply.body)
        expect(body.override).toEqual({ scope: "repository", version: 2, policy: { package_installs: "allow" } })
        expect(body.effective.policy).toEqual({ ...DEFAULTS, package_installs: "allow" })
        expect(body.effective.sources).toEqual({ ...sourcesAll("account"), package_installs: "repository" })
      }))

    it.effect("{} removes the override, and its version starts again from 0", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { force_push: "deny" })
        yield* putOverride(user.token, user.repositoryId, { force_push: "allow" }, 1)
        const cleared = yield* putOverride(user.token, user.repositoryId, {}, 2)
        expect(cleared.status).toBe(200)
        expect(cleared.body).toEqual({
          repository_id: user.repositoryId,
          override: null,
          effective: { scope: "effective", policy: DEFAULTS, sources: sourcesAll("default"), capped: [] }
        })
        expect(record((yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })).body).override)
          .toBeNull()
        // Version 0 again: the next write omits expected_version, and a stale 2 is refused.
        expect((yield* putOverride(user.token, user.repositoryId, { network: "deny" }, 2)).body).toMatchObject({
          code: "version_conflict",
          current_version: 0
        })
        const next = yield* putOverride(user.token, user.repositoryId, { network: "deny" })
        expect(record(next.body).override).toEqual({ scope: "repository", version: 1, policy: { network: "deny" } })
      }))

    it.effect("{} on a repository without an override is 200 and leaves it at version 0", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const reply = yield* putOverride(user.token, user.repositoryId, {})
        expect(reply.status).toBe(200)
        expect(record(reply.body).override).toBeNull()
        expect(record((yield* putOverride(user.token, user.repositoryId, { network: "deny" })).body).override)
          .toMatchObject({ version: 1 })
      }))

    it.effect("a stale expected_version is 409 version_conflict with the override's version, and nothing changes", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { force_push: "deny" })
        for (const [policy, expected] of [[{ force_push: "allow" }, undefined], [{}, 0], [{}, 5]] as const) {
          const reply = yield* putOverride(user.token, user.repositoryId, policy, expected)
          expect(reply.status).toBe(409)
          expect(reply.body).toEqual({
            type: "about:blank",
            title: "Conflict",
            status: 409,
            code: "version_conflict",
            detail: expect.any(String),
            current_version: 1
          })
        }
        const current = yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })
        expect(record(current.body).override).toEqual({
          scope: "repository",
          version: 1,
          policy: { force_push: "deny" }
        })
      }))

    it.effect("the override's version is its own: account saves do not make it stale", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { force_push: "deny" })
        yield* putAccountPolicy(user.token, DEFAULTS)
        yield* putAccountPolicy(user.token, DEFAULTS, 1)
        const reply = yield* putOverride(user.token, user.repositoryId, { force_push: "allow" }, 1)
        expect(reply.status).toBe(200)
        expect(record(reply.body).override).toMatchObject({ version: 2 })
      }))

    it.effect("run_tests_before_claim may appear only as true, and the repository never changes it", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const refused = yield* putOverride(user.token, user.repositoryId, { run_tests_before_claim: false })
        expect(refused.status).toBe(422)
        expect(refused.body).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#/policy/run_tests_before_claim", detail: "must be true" }]
        })
        const restated = yield* putOverride(user.token, user.repositoryId, { run_tests_before_claim: true })
        expect(restated.status).toBe(200)
        const body = record(restated.body)
        expect(body.override).toEqual({ scope: "repository", version: 1, policy: { run_tests_before_claim: true } })
        expect(body.effective.policy).toEqual(DEFAULTS)
        expect(body.effective.sources).toEqual(sourcesAll("default"))
      }))
  })

  describe("validation (422)", () => {
    it.effect("unknown fields, wrong types and values that are not accepted are listed field by field", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const reply = yield* putOverride(user.token, user.repositoryId, {
          colour: "blue",
          force_push: "sometimes",
          nightly_backlog_sweep: "yes",
          unverified_delivery: "pull_request"
        })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject(problem(422, "validation_failed"))
        expect(pointers(reply)).toEqual([
          "#/policy/colour",
          "#/policy/force_push",
          "#/policy/nightly_backlog_sweep",
          "#/policy/unverified_delivery"
        ])
      }))

    it.effect("a missing policy, an unknown member beside it or an impossible expected_version is 422", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const missing = yield* call("PUT", repositoryPolicy(user.repositoryId), {
          token: user.token,
          body: { expected_version: 0 }
        })
        expect(pointers(missing)).toEqual(["#/policy"])
        const extra = yield* call("PUT", repositoryPolicy(user.repositoryId), {
          token: user.token,
          body: { policy: {}, version: 1 }
        })
        expect(pointers(extra)).toEqual(["#/version"])
        const huge = yield* putOverride(user.token, user.repositoryId, {}, 2_147_483_648)
        expect(pointers(huge)).toEqual(["#/expected_version"])
      }))

    it.effect("an override may not raise autonomy_ceiling above the account's", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const reply = yield* putOverride(user.token, user.repositoryId, { autonomy_ceiling: "pull_request" })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({
          code: "validation_failed",
          errors: [{ pointer: "#/policy/autonomy_ceiling", detail: expect.stringContaining("draft_pr") }]
        })
        // Once the account allows it, the same override is fine.
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: "pull_request" })
        expect((yield* putOverride(user.token, user.repositoryId, { autonomy_ceiling: "pull_request" })).status).toBe(
          200
        )
      }))

    it.effect("an override's delivery field above the ceiling it ends up with is 422 at that field", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const aboveAccount = yield* putOverride(user.token, user.repositoryId, { delivery_mode: "pull_request" })
        expect(aboveAccount.status).toBe(422)
        expect(pointers(aboveAccount)).toEqual(["#/policy/delivery_mode"])
        const aboveOwn = yield* putOverride(user.token, user.repositoryId, {
          autonomy_ceiling: "preserve_only",
          delivery_mode: "draft_pr",
          unverified_delivery: "draft_pr"
        })
        expect(aboveOwn.status).toBe(422)
        expect(pointers(aboveOwn)).toEqual(["#/policy/delivery_mode", "#/policy/unverified_delivery"])
      }))

    it.effect("lowering the ceiling below a delivery level the account sets is 422 at the inherited field", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putAccountPolicy(user.token, { ...DEFAULTS, delivery_mode: "draft_pr" })
        const reply = yield* putOverride(user.token, user.repositoryId, { autonomy_ceiling: "preserve_only" })
        expect(reply.status).toBe(422)
        expect(reply.body).toMatchObject({
          errors: [{ pointer: "#/policy/delivery_mode", detail: expect.stringContaining("override") }]
        })
        const fixed = yield* putOverride(user.token, user.repositoryId, {
          autonomy_ceiling: "preserve_only",
          delivery_mode: "preserve_only"
        })
        expect(fixed.status).toBe(200)
        expect(record(fixed.body).effective).toMatchObject({
          policy: { autonomy_ceiling: "preserve_only", delivery_mode: "preserve_only" },
          sources: { autonomy_ceiling: "repository", delivery_mode: "repository", force_push: "account" },
          capped: []
        })
      }))

    it.effect("a bad value is reported before a stale version, and nothing is written", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { network: "deny" })
        const schemaError = yield* putOverride(user.token, user.repositoryId, { network: "sometimes" }, 7)
        expect(schemaError.status).toBe(422)
        const ruleError = yield* putOverride(user.token, user.repositoryId, { autonomy_ceiling: "pull_request" }, 7)
        expect(ruleError.status).toBe(422)
        const current = yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })
        expect(record(current.body).override).toEqual({ scope: "repository", version: 1, policy: { network: "deny" } })
      }))
  })

  describe("the autonomy ceiling", () => {
    it.effect("a later, stricter account ceiling caps the repository's delivery fields and lists them in capped", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: "pull_request" })
        yield* putOverride(user.token, user.repositoryId, {
          autonomy_ceiling: "pull_request",
          delivery_mode: "pull_request",
          unverified_delivery: "draft_pr"
        })
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: "preserve_only" }, 1)
        const reply = yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })
        expect(reply.status).toBe(200)
        const body = record(reply.body)
        // The override is kept as written; only the effective view is capped.
        expect(body.override?.policy).toEqual({
          autonomy_ceiling: "pull_request",
          delivery_mode: "pull_request",
          unverified_delivery: "draft_pr"
        })
        expect(body.effective).toEqual({
          scope: "effective",
          policy: {
            ...DEFAULTS,
            autonomy_ceiling: "preserve_only",
            delivery_mode: "preserve_only",
            unverified_delivery: "preserve_only"
          },
          sources: {
            ...sourcesAll("account"),
            autonomy_ceiling: "account",
            delivery_mode: "repository",
            unverified_delivery: "repository"
          },
          capped: ["delivery_mode", "unverified_delivery"]
        })
      }))

    it.effect("a capped field is lowered to the highest level the ceiling allows, not to the lowest", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: "pull_request" })
        yield* putOverride(user.token, user.repositoryId, { delivery_mode: "pull_request" })
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: "draft_pr" }, 1)
        const body = record((yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })).body)
        expect(body.effective.policy).toMatchObject({ delivery_mode: "draft_pr", autonomy_ceiling: "draft_pr" })
        expect(body.effective.capped).toEqual(["delivery_mode"])
      }))

    it.effect("the repository's own lower ceiling caps what the account later raises", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { autonomy_ceiling: "preserve_only" })
        yield* putAccountPolicy(user.token, { ...DEFAULTS, delivery_mode: "draft_pr", unverified_delivery: "draft_pr" })
        const body = record((yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })).body)
        expect(body.effective.policy).toMatchObject({
          autonomy_ceiling: "preserve_only",
          delivery_mode: "preserve_only",
          unverified_delivery: "preserve_only"
        })
        expect(body.effective.sources).toMatchObject({
          autonomy_ceiling: "repository",
          delivery_mode: "account",
          unverified_delivery: "account"
        })
        expect(body.effective.capped).toEqual(["delivery_mode", "unverified_delivery"])
      }))

    it.effect("the account's ceiling wins when it is lower than the override's", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { autonomy_ceiling: "draft_pr" })
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: "preserve_only" })
        const body = record((yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })).body)
        expect(body.effective.policy).toMatchObject({ autonomy_ceiling: "preserve_only" })
        expect(body.effective.sources).toMatchObject({ autonomy_ceiling: "account" })
        expect(body.effective.capped).toEqual([])
      }))
  })

  describe("unknown repositories (404)", () => {
    const expectNotFound = (reply: { readonly status: number; readonly body: unknown }) => {
      expect(reply.status).toBe(404)
      expect(reply.body).toEqual({
        type: "about:blank",
        title: "Not Found",
        status: 404,
        code: "repository_not_found",
        detail: expect.any(String)
      })
    }

    it.effect("a repository that does not exist is 404 repository_not_found", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const unknown = "0190a5d2-0000-7000-8000-000000000000"
        expectNotFound(yield* call("GET", repositoryPolicy(unknown), { token: user.token }))
        expectNotFound(yield* putOverride(user.token, unknown, { force_push: "deny" }))
      }))

    it.effect("a repository_id that is not a UUID is 404 repository_not_found", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        for (const id of ["not-a-uuid", "42", "0190a5d2000070008000000000000000"]) {
          expectNotFound(yield* call("GET", repositoryPolicy(id), { token: user.token }))
          expectNotFound(yield* putOverride(user.token, id, {}))
        }
      }))

    it.effect("another account's repository is 404 and its override is untouched", () =>
      Effect.gen(function*() {
        const owner = yield* userWithRepository
        yield* putOverride(owner.token, owner.repositoryId, { force_push: "deny" })
        const stranger = yield* signedInUser()
        expectNotFound(yield* call("GET", repositoryPolicy(owner.repositoryId), { token: stranger.token }))
        expectNotFound(yield* putOverride(stranger.token, owner.repositoryId, {}, 1))
        const current = yield* call("GET", repositoryPolicy(owner.repositoryId), { token: owner.token })
        expect(record(current.body).override).toEqual({
          scope: "repository",
          version: 1,
          policy: { force_push: "deny" }
        })
      }))

    it.effect("an organisation's repository is unknown to a user outside it", () =>
      Effect.gen(function*() {
        const organisationId = yield* createOrganisation()
        const repositoryId = yield* createRepository(organisationId)
        const outsider = yield* signedInUser()
        expectNotFound(yield* call("GET", repositoryPolicy(repositoryId), { token: outsider.token }))
      }))

    it.effect("the body is decoded before the repository is looked up: a malformed body is 422 even there", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* putOverride(user.token, "not-a-uuid", { force_push: "sometimes" })
        expect(reply.status).toBe(422)
        expect(pointers(reply)).toEqual(["#/policy/force_push"])
        // A well-formed body that breaks a rule needs the repository first, so that is 404.
        expectNotFound(yield* putOverride(user.token, "not-a-uuid", { autonomy_ceiling: "pull_request" }))
      }))
  })

  describe("organisations", () => {
    it.effect("members share the organisation's repositories, overrides and policy", () =>
      Effect.gen(function*() {
        const organisationId = yield* createOrganisation()
        const repositoryId = yield* createRepository(organisationId)
        const ada = yield* signedInUser({ organisationId })
        const bob = yield* signedInUser({ organisationId })
        yield* putAccountPolicy(ada.token, { ...DEFAULTS, network: "deny" })
        const written = yield* putOverride(ada.token, repositoryId, { force_push: "deny" })
        expect(written.status).toBe(200)
        const seen = yield* call("GET", repositoryPolicy(repositoryId), { token: bob.token })
        expect(seen.body).toEqual(written.body)
        expect(record(seen.body).effective.policy).toMatchObject({ network: "deny", force_push: "deny" })
        const stale = yield* putOverride(bob.token, repositoryId, { force_push: "allow" })
        expect(stale.body).toMatchObject({ code: "version_conflict", current_version: 1 })
        expect(record((yield* putOverride(bob.token, repositoryId, {}, 1)).body).override).toBeNull()
      }))

    it.effect("a repository_id in upper case names the same repository", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const reply = yield* call("GET", repositoryPolicy(user.repositoryId.toUpperCase()), { token: user.token })
        // UUIDs are case-insensitive; the record names the repository in canonical form.
        expect(reply.status).toBe(200)
        expect(record(reply.body).repository_id).toBe(user.repositoryId)
      }))
  })

  describe("concurrent writers", () => {
    const race = (token: string, repositoryId: string, expectedVersion: number | undefined) =>
      Effect.all(
        Array.from({ length: 10 }, (_, i) =>
          putOverride(token, repositoryId, { network: i % 2 === 0 ? "allow" : "deny" }, expectedVersion)),
        { concurrency: "unbounded" }
      )

    it.effect("ten first overrides at once: exactly one wins, nine get 409", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        const replies = yield* race(user.token, user.repositoryId, undefined)
        expect(replies.filter((reply) => reply.status === 200)).toHaveLength(1)
        const conflicts = replies.filter((reply) => reply.status === 409)
        expect(conflicts).toHaveLength(9)
        for (const reply of conflicts) {
          expect(reply.body).toMatchObject({ code: "version_conflict", current_version: 1 })
        }
        const current = yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })
        expect(record(current.body).override).toMatchObject({ version: 1 })
      }))

    it.effect("ten writes from the same override version at once: exactly one wins and the version moves by one", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { force_push: "deny" })
        yield* putOverride(user.token, user.repositoryId, { force_push: "allow" }, 1)
        const replies = yield* race(user.token, user.repositoryId, 2)
        const winners = replies.filter((reply) => reply.status === 200)
        expect(winners).toHaveLength(1)
        expect(replies.filter((reply) => reply.status === 409)).toHaveLength(9)
        const current = record((yield* call("GET", repositoryPolicy(user.repositoryId), { token: user.token })).body)
        expect(current.override?.version).toBe(3)
        expect(current).toEqual(record(winners[0]?.body))
      }))

    it.effect("a clear racing writes from the same version: exactly one of them wins", () =>
      Effect.gen(function*() {
        const user = yield* userWithRepository
        yield* putOverride(user.token, user.repositoryId, { force_push: "deny" })
        const replies = yield* Effect.all(
          [
            putOverride(user.token, user.repositoryId, {}, 1),
            ...Array.from({ length: 9 }, () => putOverride(user.token, user.repositoryId, { network: "deny" }, 1))
          ],
          { concurrency: "unbounded" }
        )
        expect(replies.filter((reply) => reply.status === 200)).toHaveLength(1)
        expect(replies.filter((reply) => reply.status === 409)).toHaveLength(9)
      }))
  })
})
