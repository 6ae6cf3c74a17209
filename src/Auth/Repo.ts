import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { UserRecord } from "../Domain/Account.js"
import { orDefect } from "../Sql/Errors.js"

export class LiveSessionRow extends UserRecord.extend<LiveSessionRow>("LiveSessionRow")({
  session_id: Schema.String,
  expires_at: Schema.DateTimeUtcFromDate
}) {}

/** Sign-in sessions: the server-side half of a token, so logout can revoke it (D2). */
export class SessionsRepo extends Effect.Service<SessionsRepo>()("Auth/SessionsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.single({
      Request: Schema.Struct({ user_id: Schema.String, expires_at: Schema.DateTimeUtcFromDate }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: (session) => sql`INSERT INTO auth_sessions ${sql.insert(session)} RETURNING id`
    })

    /** One round trip per authenticated request: the session, its user and their account. */
    const findLive = SqlSchema.findOne({
      Request: Schema.Struct({ session_id: Schema.String, user_id: Schema.String }),
      Result: LiveSessionRow,
      execute: ({ session_id, user_id }) =>
        sql`SELECT u.id, u.email, u.name, u.is_admin, u.is_operator, false AS disabled, u.password_hash, m.organisation_id,
                   s.id AS session_id, s.expires_at
            FROM auth_sessions s
            JOIN users u ON u.id = s.user_id
            LEFT JOIN memberships m ON m.user_id = u.id
            WHERE s.id = ${session_id} AND s.user_id = ${user_id}
              AND s.revoked_at IS NULL AND s.expires_at > now() AND u.disabled_at IS NULL`
    })

    const revoke = SqlSchema.void({
      Request: Schema.String,
      execute: (id) => sql`UPDATE auth_sessions SET revoked_at = now() WHERE id = ${id} AND revoked_at IS NULL`
    })

    const revokeAllOfUser = SqlSchema.void({
      Request: Schema.String,
      execute: (userId) =>
        sql`UPDATE auth_sessions SET revoked_at = now() WHERE user_id = ${userId} AND revoked_at IS NULL`
    })

    return {
      insert: orDefect(insert),
      findLive: orDefect(findLive),
      revoke: orDefect(revoke),
      revokeAllOfUser: orDefect(revokeAllOfUser)
    } as const
  })
}) {}
