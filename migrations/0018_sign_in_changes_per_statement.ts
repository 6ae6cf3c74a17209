import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Sign-ins that end are announced once per statement and user, not once per row (issue 39.5). A
 * statement that ends one sign-in of a user announces `session:<id>`, as before; one that ends
 * several of a user (a password reset, a disabled user, a hand-written revocation) announces
 * `user:<id>` once. Announced row by row, 12,000 sign-ins of one user were 12,000 notifications
 * that every listening process read in the statement's order, and a sign-in late in it was
 * still answered from memory over 100 ms after the statement returned.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE FUNCTION announce_ended_sign_ins() RETURNS trigger AS $$
    BEGIN
      PERFORM pg_notify('sign_in_changes',
        CASE WHEN count(*) = 1 THEN 'session:' || min(id::text) ELSE 'user:' || user_id::text END)
      FROM ended GROUP BY user_id;
      RETURN NULL;
    END
    $$ LANGUAGE plpgsql`
  yield* sql`DROP TRIGGER auth_sessions_announce ON auth_sessions`
  // A trigger with a transition table takes one event; the rows as they were name the sign-ins and their users.
  yield* sql`
    CREATE TRIGGER auth_sessions_announce_update AFTER UPDATE ON auth_sessions
    REFERENCING OLD TABLE AS ended FOR EACH STATEMENT EXECUTE FUNCTION announce_ended_sign_ins()`
  yield* sql`
    CREATE TRIGGER auth_sessions_announce_delete AFTER DELETE ON auth_sessions
    REFERENCING OLD TABLE AS ended FOR EACH STATEMENT EXECUTE FUNCTION announce_ended_sign_ins()`
})
