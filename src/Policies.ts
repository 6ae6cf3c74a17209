import { Effect, Option } from "effect"
import type { Account } from "./Domain/Account.js"
import { FieldError, ValidationFailed, VersionConflict } from "./Domain/Errors.js"
import { AccountPolicyRecord } from "./Policies/Api.js"
import { defaults, type Policy } from "./Policies/Catalog.js"
import { accountViolations, type AccountBase, type Violation } from "./Policies/Policy.js"
import { type AccountPolicyRow, PoliciesRepo } from "./Policies/Repo.js"

const invalid = (violations: ReadonlyArray<Violation>) =>
  ValidationFailed.of(violations.map(({ detail, field }) => new FieldError({ pointer: `#/policy/${field}`, detail })))

const accountKey = (account: Account) => ({ account_kind: account.kind, account_id: account.id })

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

/** The account autonomy policy (seed §4.5–4.6, D4, D5). */
export class Policies extends Effect.Service<Policies>()("Policies", {
  effect: Effect.gen(function*() {
    const repo = yield* PoliciesRepo

    const findAccountPolicy = (account: Account) => repo.findAccountPolicy(accountKey(account)).pipe(Effect.orDie)

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
          : repo.updateAccountPolicy({ ...key, policy, expected_version: expectedVersion })).pipe(Effect.orDie)
        if (Option.isSome(saved)) return accountRecord(account, saved)
        const current = yield* findAccountPolicy(account)
        return yield* new VersionConflict({
          detail: "The policy was changed by another writer; read it again.",
          current_version: versionOf(current)
        })
      }
    )

    return { getAccountPolicy, replaceAccountPolicy } as const
  }),
  dependencies: [PoliciesRepo.Default]
}) {}
