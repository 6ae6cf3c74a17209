import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // The queue dashboard's role (D9): it shows every account's jobs, so it is not an account admin's.
  // Only the CLI sets it.
  yield* sql`ALTER TABLE users ADD COLUMN is_operator boolean NOT NULL DEFAULT false`
})
