import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // An operator may disable a user (D10): sign-in then answers invalid_credentials, and every
  // session has ended. Kept as a time, for the record; enabling clears it.
  yield* sql`ALTER TABLE users ADD COLUMN disabled_at timestamptz`
})
