import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Sign-ins that can no longer be used are deleted a batch at a time at sign-in (issue 22.3):
 * expired ones oldest first, and the signing-in user's revoked ones. Both are found by index.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX auth_sessions_expires_idx ON auth_sessions (expires_at)`
  yield* sql`CREATE INDEX auth_sessions_revoked_user_idx ON auth_sessions (user_id) WHERE revoked_at IS NOT NULL`
})
