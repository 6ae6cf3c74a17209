import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Every change that can end or alter a sign-in (a revoked or deleted session, a user disabled,
 * renamed or made admin, a membership that moves their account) is announced on one channel at
 * commit, whoever makes it: an API process, the CLI or a hand-written statement. API processes
 * keep authenticated sessions in memory only while they hear this channel (D2).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // TG_ARGV: what a row names ("session" or "user") and the column holding that id.
  yield* sql`
    CREATE FUNCTION announce_sign_in_change() RETURNS trigger AS $$
    BEGIN
      IF TG_LEVEL = 'STATEMENT' THEN
        PERFORM pg_notify('sign_in_changes', 'all');
        RETURN NULL;
      END IF;
      IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('sign_in_changes', TG_ARGV[0] || ':' || (to_jsonb(OLD) ->> TG_ARGV[1]));
      END IF;
      IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('sign_in_changes', TG_ARGV[0] || ':' || (to_jsonb(NEW) ->> TG_ARGV[1]));
      END IF;
      RETURN NULL;
    END
    $$ LANGUAGE plpgsql`
  // A new session changes nothing a process keeps; a session ends by update (revoked) or delete.
  yield* sql`
    CREATE TRIGGER auth_sessions_announce AFTER UPDATE OR DELETE ON auth_sessions
    FOR EACH ROW EXECUTE FUNCTION announce_sign_in_change('session', 'id')`
  yield* sql`
    CREATE TRIGGER users_announce AFTER UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION announce_sign_in_change('user', 'id')`
  yield* sql`
    CREATE TRIGGER memberships_announce AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION announce_sign_in_change('user', 'user_id')`
  for (const table of ["auth_sessions", "users", "memberships"]) {
    yield* sql`
      CREATE TRIGGER ${sql(`${table}_announce_truncate`)} AFTER TRUNCATE ON ${sql(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION announce_sign_in_change()`
  }
})
