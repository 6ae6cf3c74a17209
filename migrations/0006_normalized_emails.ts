import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { normalizeEmail } from "../src/Domain/Account.js"

/**
 * Emails are stored in their one spelling (NFKC, lower case; D2), computed by
 * the same function that lookups and sign-in counters use: PostgreSQL's
 * `lower()` does not lower-case as JavaScript does, so SQL cannot be trusted
 * to match it. Two users whose addresses become one stop the migration.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const users = yield* sql<{ id: string; email: string }>`SELECT id, email FROM users ORDER BY id`
  const owners = new Map<string, string>()
  for (const user of users) {
    const email = normalizeEmail(user.email)
    const other = owners.get(email)
    if (other !== undefined) {
      return yield* Effect.dieMessage(
        `users ${other} and ${user.id} share the email ${email} once normalised; merge them first`
      )
    }
    owners.set(email, user.id)
    if (email !== user.email) yield* sql`UPDATE users SET email = ${email} WHERE id = ${user.id}`
  }
  yield* sql`DROP INDEX users_email_key`
  yield* sql`CREATE UNIQUE INDEX users_email_key ON users (email)`
})
