import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKey } from "../Domain/Account.js"
import { Policy, PolicyOverride } from "../Domain/PolicyCatalog.js"
import { orDefect } from "../Sql/Errors.js"

export class AccountPolicyRow extends Schema.Class<AccountPolicyRow>("AccountPolicyRow")({
  version: Schema.Int,
  policy: Policy,
  updated_at: Schema.DateTimeUtcFromDate
}) {}

export class OverrideRow extends Schema.Class<OverrideRow>("OverrideRow")({
  version: Schema.Int,
  policy: PolicyOverride
}) {}

const RepositoryKey = Schema.Struct({ ...AccountKey.fields, repository_id: Schema.String })

const Id = Schema.Struct({ id: Schema.String })

/** Account policies and repository overrides: SQL only, no decisions. */
export class PoliciesRepo extends Effect.Service<PoliciesRepo>()("Policies/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const findAccountPolicy = SqlSchema.findOne({
      Request: AccountKey,
      Result: AccountPolicyRow,
      execute: ({ account_id, account_kind }) =>
        sql`SELECT version, policy, updated_at FROM account_policies
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /** The first save (expected version 0): nothing when a concurrent first save won. */
    const insertAccountPolicy = SqlSchema.findOne({
      Request: Schema.Struct({ ...AccountKey.fields, policy: Schema.parseJson(Policy) }),
      Result: AccountPolicyRow,
      execute: ({ account_id, account_kind, policy }) =>
        sql`INSERT INTO account_policies (account_kind, account_id, version, policy)
            VALUES (${account_kind}, ${account_id}, 1, ${policy}::jsonb)
            ON CONFLICT DO NOTHING
            RETURNING version, policy, updated_at`
    })

    /** A later save: nothing unless the stored version is still the expected one. */
    const updateAccountPolicy = SqlSchema.findOne({
      Request: Schema.Struct({ ...AccountKey.fields, policy: Schema.parseJson(Policy), expected_version: Schema.Int }),
      Result: AccountPolicyRow,
      execute: ({ account_id, account_kind, expected_version, policy }) =>
        sql`UPDATE account_policies SET version = version + 1, policy = ${policy}::jsonb, updated_at = now()
            WHERE account_kind = ${account_kind} AND account_id = ${account_id} AND version = ${expected_version}
            RETURNING version, policy, updated_at`
    })

    const findRepository = SqlSchema.findOne({
      Request: RepositoryKey,
      Result: Id,
      execute: ({ account_id, account_kind, repository_id }) =>
        sql`SELECT id FROM repositories
            WHERE id = ${repository_id} AND account_kind = ${account_kind} AND account_id = ${account_id}`
    })

    /**
     * Serialises override writes per repository until the transaction ends. The
     * override is read by a later statement, so it sees the previous writer's commit.
     */
    const lockRepository = SqlSchema.findOne({
      Request: RepositoryKey,
      Result: Id,
      execute: ({ account_id, account_kind, repository_id }) =>
        sql`SELECT id FROM repositories
            WHERE id = ${repository_id} AND account_kind = ${account_kind} AND account_id = ${account_id}
            FOR NO KEY UPDATE`
    })

    const findOverride = SqlSchema.findOne({
      Request: Schema.String,
      Result: OverrideRow,
      execute: (repositoryId) =>
        sql`SELECT version, policy FROM repository_policy_overrides WHERE repository_id = ${repositoryId}`
    })

    const insertOverride = SqlSchema.single({
      Request: Schema.Struct({ repository_id: Schema.String, policy: Schema.parseJson(PolicyOverride) }),
      Result: OverrideRow,
      execute: ({ policy, repository_id }) =>
        sql`INSERT INTO repository_policy_overrides (repository_id, version, policy)
            VALUES (${repository_id}, 1, ${policy}::jsonb)
            RETURNING version, policy`
    })

    const updateOverride = SqlSchema.single({
      Request: Schema.Struct({ repository_id: Schema.String, policy: Schema.parseJson(PolicyOverride) }),
      Result: OverrideRow,
      execute: ({ policy, repository_id }) =>
        sql`UPDATE repository_policy_overrides SET version = version + 1, policy = ${policy}::jsonb, updated_at = now()
            WHERE repository_id = ${repository_id}
            RETURNING version, policy`
    })

    const deleteOverride = SqlSchema.void({
      Request: Schema.String,
      execute: (repositoryId) => sql`DELETE FROM repository_policy_overrides WHERE repository_id = ${repositoryId}`
    })

    /** Which of the repositories have an override saved (D23's `has_policy_override`). */
    const overriddenRepositories = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: Schema.Struct({ repository_id: Schema.String }),
      execute: (ids) =>
        sql`SELECT repository_id FROM repository_policy_overrides WHERE repository_id = ANY(${ids}::uuid[])`
    })

    return {
      overriddenRepositories: orDefect(overriddenRepositories),
      findAccountPolicy: orDefect(findAccountPolicy),
      insertAccountPolicy: orDefect(insertAccountPolicy),
      updateAccountPolicy: orDefect(updateAccountPolicy),
      findRepository: orDefect(findRepository),
      lockRepository: orDefect(lockRepository),
      findOverride: orDefect(findOverride),
      insertOverride: orDefect(insertOverride),
      updateOverride: orDefect(updateOverride),
      deleteOverride: orDefect(deleteOverride)
    } as const
  })
}) {}
