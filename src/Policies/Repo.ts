import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKind } from "../Domain/Account.js"
import { Policy } from "./Catalog.js"

export class AccountPolicyRow extends Schema.Class<AccountPolicyRow>("AccountPolicyRow")({
  version: Schema.Int,
  policy: Policy,
  updated_at: Schema.DateTimeUtcFromDate
}) {}

const AccountKey = Schema.Struct({ account_kind: AccountKind, account_id: Schema.String })

/** Account policies: SQL only, no decisions. */
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

    return {
      findAccountPolicy,
      insertAccountPolicy,
      updateAccountPolicy
    } as const
  })
}) {}
