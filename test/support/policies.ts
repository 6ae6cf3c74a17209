import { Effect } from "effect"
import { Accounts } from "../../src/Accounts.js"
import { call, type Reply } from "./TestApp.js"

/** The safe defaults, written out from D4's table rather than read from the code under test. */
export const DEFAULTS = {
  force_push: "ask",
  run_tests_before_claim: true,
  package_installs: "ask",
  network: "ask",
  destructive_actions: "ask",
  production_credentials: "deny",
  delivery_mode: "preserve_only",
  unverified_delivery: "preserve_only",
  deployment: "deny",
  autonomy_ceiling: "draft_pr",
  nightly_backlog_sweep: false,
  show_execution_rationale: true
} as const

export const FIELDS = Object.keys(DEFAULTS)

export type PolicyBody = Record<string, unknown>

export const problem = (status: number, code: string) => ({ type: "about:blank", status, code })

export const ACCOUNT_POLICY = "/developer/account/policy"
export const repositoryPolicy = (repositoryId: string) => `/developer/account/repositories/${repositoryId}/policy`

const withVersion = (policy: unknown, expectedVersion: number | undefined) =>
  expectedVersion === undefined ? { policy } : { policy, expected_version: expectedVersion }

export const putAccountPolicy = (token: string, policy: unknown, expectedVersion?: number) =>
  call("PUT", ACCOUNT_POLICY, { token, body: withVersion(policy, expectedVersion) })

export const putOverride = (token: string, repositoryId: string, policy: unknown, expectedVersion?: number) =>
  call("PUT", repositoryPolicy(repositoryId), { token, body: withVersion(policy, expectedVersion) })

/** A repository of the given account, as an operator creates it. */
export const createRepository = (accountId: string, name = `repo-${Math.random().toString(36).slice(2, 8)}`) =>
  Effect.flatMap(Accounts, (accounts) => accounts.createRepository(accountId, name)).pipe(
    Effect.map(({ id }) => id),
    Effect.orDie
  )

export const createOrganisation = (name = "Acme") =>
  Effect.flatMap(Accounts, (accounts) => accounts.createOrganisation(name)).pipe(
    Effect.map(({ id }) => id),
    Effect.orDie
  )

interface ErrorItem {
  readonly pointer: string
  readonly detail: string
}

/** The JSON Pointers of a 422, sorted. */
export const pointers = (reply: Reply): ReadonlyArray<string> =>
  ((reply.body as { errors?: ReadonlyArray<ErrorItem> }).errors ?? []).map((error) => error.pointer).sort()

export const sourcesAll = (source: string) => Object.fromEntries(FIELDS.map((field) => [field, source]))
