import * as OpenApi from "@effect/platform/OpenApi"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Api } from "../src/Api.js"
import {
  createRepository,
  DEFAULTS,
  FIELDS,
  pointers,
  type PolicyBody,
  putAccountPolicy,
  putOverride
} from "./support/policies.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"

const CAPABILITIES = "/developer/account/capabilities"

interface ValueCapability {
  readonly value: string | boolean
  readonly accepted: boolean
  readonly effective: boolean
}

interface FieldCapability {
  readonly type: "enum" | "boolean"
  readonly default: string | boolean
  readonly repository_override: boolean
  readonly values: ReadonlyArray<ValueCapability>
}

interface Capabilities {
  readonly policy: Record<string, FieldCapability>
  readonly wallet: unknown
}

const v = (value: string | boolean, accepted: boolean, effective: boolean) => ({ value, accepted, effective })

/** D4's table, written out by hand. */
const EXPECTED = {
  force_push: {
    type: "enum",
    default: "ask",
    repository_override: true,
    values: [v("ask", true, true), v("deny", true, true), v("allow", true, false)]
  },
  run_tests_before_claim: {
    type: "boolean",
    default: true,
    repository_override: false,
    values: [v(true, true, true), v(false, false, false)]
  },
  package_installs: {
    type: "enum",
    default: "ask",
    repository_override: true,
    values: [v("ask", true, true), v("allow", true, true), v("deny", true, false)]
  },
  network: {
    type: "enum",
    default: "ask",
    repository_override: true,
    values: [v("ask", true, true), v("allow", true, false), v("deny", true, false)]
  },
  destructive_actions: {
    type: "enum",
    default: "ask",
    repository_override: true,
    values: [v("ask", true, true), v("deny", true, false)]
  },
  production_credentials: {
    type: "enum",
    default: "deny",
    repository_override: true,
    values: [v("deny", true, true), v("ask", true, false)]
  },
  delivery_mode: {
    type: "enum",
    default: "preserve_only",
    repository_override: true,
    values: [v("preserve_only", true, true), v("draft_pr", true, true), v("pull_request", true, false)]
  },
  unverified_delivery: {
    type: "enum",
    default: "preserve_only",
    repository_override: true,
    values: [v("preserve_only", true, true), v("draft_pr", true, false)]
  },
  deployment: {
    type: "enum",
    default: "deny",
    repository_override: true,
    values: [v("deny", true, true), v("ask", true, false)]
  },
  autonomy_ceiling: {
    type: "enum",
    default: "draft_pr",
    repository_override: true,
    values: [v("preserve_only", true, true), v("draft_pr", true, true), v("pull_request", true, false)]
  },
  nightly_backlog_sweep: {
    type: "boolean",
    default: false,
    repository_override: true,
    values: [v(false, true, true), v(true, true, false)]
  },
  show_execution_rationale: {
    type: "boolean",
    default: true,
    repository_override: true,
    values: [v(true, true, true), v(false, true, true)]
  }
}

const LEVELS = ["preserve_only", "draft_pr", "pull_request"]
const DELIVERY_FIELDS = ["delivery_mode", "unverified_delivery"]
const rank = (level: unknown) => LEVELS.indexOf(String(level))

/**
 * A complete policy with `field` set to `value` that keeps the cross-field
 * rule: a delivery value gets a ceiling at least as high; a ceiling gets
 * delivery fields no higher.
 */
const accountPolicyWith = (field: string, value: unknown): PolicyBody => {
  const policy: PolicyBody = { ...DEFAULTS, [field]: value }
  if (DELIVERY_FIELDS.includes(field) && rank(value) > rank(policy.autonomy_ceiling)) policy.autonomy_ceiling = value
  if (field === "autonomy_ceiling" && LEVELS.includes(String(value))) {
    for (const delivery of DELIVERY_FIELDS) {
      if (rank(policy[delivery]) > rank(value)) policy[delivery] = "preserve_only"
    }
  }
  return policy
}

/** Values a client might send that the capabilities do not list as accepted. */
const refusedValues = (capability: FieldCapability): ReadonlyArray<unknown> => [
  ...capability.values.filter((value) => !value.accepted).map((value) => value.value),
  ...(capability.type === "enum" ? ["not-a-value", "ASK", ""] : ["true", 1, null])
]

layer(TestApp(), { excludeTestServices: true })("capabilities", (it) => {
  describe("GET /developer/account/capabilities", () => {
    it.effect("lists every policy field in order with its type, default, override rule and values, and the wallet", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const reply = yield* call("GET", CAPABILITIES, { token: user.token })
        expect(reply.status).toBe(200)
        expect(reply.body).toEqual({
          policy: EXPECTED,
          wallet: { enforcement: true, credits_require_admin: true, payment_provider: null }
        })
        expect(Object.keys((reply.body as Capabilities).policy)).toEqual(FIELDS)
      }))

    it.effect("the defaults it lists are what an account starts with", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const capabilities = (yield* call("GET", CAPABILITIES, { token: user.token })).body as Capabilities
        const policy = yield* call("GET", "/developer/account/policy", { token: user.token })
        const defaults = Object.fromEntries(
          Object.entries(capabilities.policy).map(([field, capability]) => [field, capability.default])
        )
        expect(policy.body).toMatchObject({ version: 0, policy: defaults })
      }))

    it.effect("the OpenAPI document lists the same accepted values for every field", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const capabilities = (yield* call("GET", CAPABILITIES, { token: user.token })).body as Capabilities
        const schemas = OpenApi.fromApi(Api).components.schemas as Record<
          string,
          { properties: Record<string, { enum?: ReadonlyArray<unknown> }> }
        >
        for (const [field, capability] of Object.entries(capabilities.policy)) {
          const accepted = capability.values.filter((value) => value.accepted).map((value) => value.value)
          expect(schemas.Policy?.properties[field]?.enum, field).toEqual(accepted)
          expect(schemas.PolicyOverride?.properties[field]?.enum, field).toEqual(accepted)
        }
      }))
  })

  describe("the API accepts exactly what the capabilities say", () => {
    it.effect("account policy: every accepted value saves, every other value is 422 at its field", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const capabilities = (yield* call("GET", CAPABILITIES, { token: user.token })).body as Capabilities
        let version = 0
        for (const [field, capability] of Object.entries(capabilities.policy)) {
          for (const { value } of capability.values.filter((candidate) => candidate.accepted)) {
            const reply = yield* putAccountPolicy(user.token, accountPolicyWith(field, value), version)
            expect(reply.status, `${field}=${JSON.stringify(value)}`).toBe(200)
            expect(reply.body).toMatchObject({ version: version + 1, policy: { [field]: value } })
            version += 1
          }
          for (const value of refusedValues(capability)) {
            const reply = yield* putAccountPolicy(user.token, accountPolicyWith(field, value), version)
            expect(reply.status, `${field}=${JSON.stringify(value)}`).toBe(422)
            expect(pointers(reply)).toEqual([`#/policy/${field}`])
          }
        }
        expect((yield* call("GET", "/developer/account/policy", { token: user.token })).body).toMatchObject({ version })
      }))

    it.effect("repository override: every accepted value saves, every other value is 422 at its field", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const repositoryId = yield* createRepository(user.id)
        const capabilities = (yield* call("GET", CAPABILITIES, { token: user.token })).body as Capabilities
        // The highest ceiling, so an override can reach every delivery level.
        const ceiling = capabilities.policy.autonomy_ceiling?.values.filter((value) => value.accepted).at(-1)?.value
        yield* putAccountPolicy(user.token, { ...DEFAULTS, autonomy_ceiling: ceiling })
        let version = 0
        for (const [field, capability] of Object.entries(capabilities.policy)) {
          for (const { value } of capability.values.filter((candidate) => candidate.accepted)) {
            const override = { [field]: value }
            const reply = yield* putOverride(user.token, repositoryId, override, version)
            expect(reply.status, `${field}=${JSON.stringify(value)}`).toBe(200)
            version += 1
            expect(reply.body).toMatchObject({ override: { version, policy: override } })
            const effective = (reply.body as { effective: { policy: PolicyBody; sources: Record<string, string> } })
              .effective
            if (capability.repository_override) {
              expect(effective.policy[field]).toEqual(value)
              expect(effective.sources[field]).toBe("repository")
            } else {
              expect(effective.sources[field]).toBe("account")
            }
          }
          for (const value of refusedValues(capability)) {
            const reply = yield* putOverride(user.token, repositoryId, { [field]: value }, version)
            expect(reply.status, `${field}=${JSON.stringify(value)}`).toBe(422)
            expect(pointers(reply)).toEqual([`#/policy/${field}`])
          }
        }
      }))
  })
})
