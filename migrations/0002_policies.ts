import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A row exists only once the account has saved its policy: version 0 is "no row, defaults" (seed §2.2).
  // The policy is one JSON object so the catalog, not the schema, decides its fields and values.
  // Accounts are organisations or users, so there is no foreign key (as for repositories).
  yield* sql`
    CREATE TABLE account_policies (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      version integer NOT NULL CHECK (version > 0),
      policy jsonb NOT NULL CHECK (jsonb_typeof(policy) = 'object'),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_kind, account_id)
    )`
  // Clearing an override deletes its row, so its version starts again from 0 (D5).
  yield* sql`
    CREATE TABLE repository_policy_overrides (
      repository_id uuid PRIMARY KEY REFERENCES repositories (id) ON DELETE CASCADE,
      version integer NOT NULL CHECK (version > 0),
      policy jsonb NOT NULL CHECK (jsonb_typeof(policy) = 'object' AND policy <> '{}'::jsonb),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
})
