import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { type Account, accountKey, isUuid } from "./Domain/Account.js"
import { FieldError, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import {
  AccountPolicyRecord,
  EffectivePolicy,
  RepositoryNotFound,
  RepositoryOverride,
  RepositoryPolicyRecord
} from "./Domain/Policy.js"
import { defaults, type Policy, type PolicyOverride } from "./Domain/PolicyCatalog.js"
import {
  type AccountBase,
  accountViolations,
  effective,
  overrideViolations,
  type Violation
} from "./Policies/Policy.js"
import { type AccountPolicyRow, type OverrideRow, PoliciesRepo } from "./Policies/Repo.js"

const invalid = (violations: ReadonlyArray<Violation>) =>
  ValidationFailed.of(violations.map(({ detail, field }) => new FieldError({ pointer: `#/policy/${field}`, detail })))

const repositoryNotFound = () => new RepositoryNotFound({ detail: "This account has no such repository." })

const baseOf = (row: Option.Option<AccountPolicyRow>): AccountBase =>
  Option.match(row, {
    onNone: () => ({ policy: defaults, source: "default" }),
    onSome: ({ policy }) => ({ policy, source: "account" })
  })

/** Nothing stored is version 0 (seed §2.2, D5). */
const versionOf = (row: Option.Option<{ readonly version: number }>) =>
  Option.match(row, { onNone: () => 0, onSome: ({ version }) => version })

const accountRecord = (account: Account, row: Option.Option<AccountPolicyRow>) =>
  new AccountPolicyRecord({
    scope: "account",
    scope_id: account.id,
    version: versionOf(row),
    policy: baseOf(row).policy,
    updated_at: Option.match(row, { onNone: () => null, onSome: ({ updated_at }) => updated_at })
  })

const repositoryRecord = (repositoryId: string, account: AccountBase, override: Option.Option<OverrideRow>) => {
  const current = Option.getOrNull(override)
  return new RepositoryPolicyRecord({
    repository_id: repositoryId,
    override: current === null
      ? null
      : new RepositoryOverride({ scope: "repository", version: current.version, policy: current.policy }),
    effective: new EffectivePolicy({ scope: "effective", ...effective(account, current?.policy ?? null) })
  })
}

/** The account autonomy policy and its per-repository overrides (seed §4.5–4.8, D4, D5). */
export class Policies extends Effect.Service<Policies>()("Policies", {
  effect: Effect.gen(function*() {
    const repo = yield* PoliciesRepo
    const sql = yield* SqlClient.SqlClient

    const findAccountPolicy = (account: Account) => repo.findAccountPolicy(accountKey(account))

    const getAccountPolicy = Effect.fn("Policies.getAccountPolicy")(function*(account: Account) {
      return accountRecord(account, yield* findAccountPolicy(account))
    })

    /**
     * Replaces the whole policy if the stored version is still `expectedVersion`.
     * The check and the write are one conditional statement, so of writers racing
     * from the same version exactly one succeeds (D5).
     */
    const replaceAccountPolicy = Effect.fn("Policies.replaceAccountPolicy")(
      function*(account: Account, policy: Policy, expectedVersion: number) {
        const violations = accountViolations(policy)
        if (violations.length > 0) return yield* invalid(violations)
        const key = accountKey(account)
        const saved = yield* (expectedVersion === 0
          ? repo.insertAccountPolicy({ ...key, policy })
          : repo.updateAccountPolicy({ ...key, policy, expected_version: expectedVersion }))
        if (Option.isSome(saved)) return accountRecord(account, saved)
        const current = yield* findAccountPolicy(account)
        return yield* new VersionConflict({
          detail: "The policy was changed by another writer; read it again.",
          current_version: versionOf(current)
        })
      }
    )

    const getRepositoryPolicy = Effect.fn("Policies.getRepositoryPolicy")(
      function*(account: Account, repositoryId: string) {
        if (!isUuid(repositoryId)) return yield* repositoryNotFound()
        const repository = yield* repo.findRepository({ ...accountKey(account), repository_id: repositoryId })
        if (Option.isNone(repository)) return yield* repositoryNotFound()
        const [base, override] = yield* Effect.all([
          Effect.map(findAccountPolicy(account), baseOf),
          repo.findOverride(repository.value.id)
        ], { concurrency: 2 })
        return repositoryRecord(repository.value.id, base, override)
      }
    )

    /**
     * Replaces the whole override (`{}` removes it). Under a lock on the
     * repository: existence (404), the rules against the account's current
     * policy (422), then the version (409), then the write.
     */
    const replaceRepositoryPolicy = Effect.fn("Policies.replaceRepositoryPolicy")(
      function*(account: Account, repositoryId: string, override: PolicyOverride, expectedVersion: number) {
        if (!isUuid(repositoryId)) return yield* repositoryNotFound()
        return yield* Effect.gen(function*() {
          const repository = yield* repo.lockRepository({ ...accountKey(account), repository_id: repositoryId })
          if (Option.isNone(repository)) return yield* repositoryNotFound()
          const id = repository.value.id
          const base = baseOf(yield* findAccountPolicy(account))
          const violations = overrideViolations(base, override)
          if (violations.length > 0) return yield* invalid(violations)
          const current = yield* repo.findOverride(id)
          const currentVersion = versionOf(current)
          if (currentVersion !== expectedVersion) {
            return yield* new VersionConflict({
              detail: "The repository's override was changed by another writer; read it again.",
              current_version: currentVersion
            })
          }
          const saved = Object.keys(override).length === 0
            ? Effect.as(repo.deleteOverride(id), Option.none())
            : Effect.asSome(
              Option.isNone(current)
                ? repo.insertOverride({ repository_id: id, policy: override })
                : repo.updateOverride({ repository_id: id, policy: override })
            )
          return repositoryRecord(id, base, yield* saved)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      }
    )

    /** Which of the repositories (ids the caller read from its account's) have an override saved (D23). */
    const overriddenRepositories = Effect.fn("Policies.overriddenRepositories")(function*(
      repositoryIds: ReadonlyArray<string>
    ) {
      if (repositoryIds.length === 0) return new Set<string>()
      const rows = yield* repo.overriddenRepositories(repositoryIds)
      return new Set(rows.map((row) => row.repository_id))
    })

    return {
      getAccountPolicy,
      replaceAccountPolicy,
      getRepositoryPolicy,
      replaceRepositoryPolicy,
      overriddenRepositories
    } as const
  }),
  dependencies: [PoliciesRepo.Default]
}) {}
