import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { UserRecord } from "../Domain/Account.js"
import { orDefect } from "../Sql/Errors.js"

export class LiveSignInRow extends UserRecord.extend<LiveSignInRow>("LiveSignInRow")({
  sign_in_id: Schema.String,
  expires_at: Schema.DateTimeUtcFromDate
}) {}

/** Sign-ins (table `auth_sessions`): the server-side half of a token, so logout can revoke it (D2). */
export class SignInsRepo extends Effect.Service<SignInsRepo>()("Auth/SignInsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.single({
      Request: Schema.Struct({ user_id: Schema.String, expires_at: Schema.DateTimeUtcFromDate }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: (signIn) => sql`INSERT INTO auth_sessions ${sql.insert(signIn)} RETURNING id`
    })

    /** One round trip per authenticated request: the sign-in, its user and their account. */
    const findLive = SqlSchema.findOne({
      Request: Schema.Struct({ sign_in_id: Schema.String, user_id: Schema.String }),
      Result: LiveSignInRow,
      execute: ({ sign_in_id, user_id }) =>
        sql`SELECT u.id, u.email, u.name, u.is_admin, u.is_operator, false AS disabled, u.password_hash, m.organisation_id,
                   s.id AS sign_in_id, s.expires_at
            FROM auth_sessions s
            JOIN users u ON u.id = s.user_id
            LEFT JOIN memberships m ON m.user_id = u.id
            WHERE s.id = ${sign_in_id} AND s.user_id = ${user_id}
              AND s.revoked_at IS NULL AND s.expires_at > now() AND u.disabled_at IS NULL`
    })

    const revoke = SqlSchema.void({
      Request: Schema.String,
      execute: (id) => sql`UPDATE auth_sessions SET revoked_at = now() WHERE id = ${id} AND revoked_at IS NULL`
    })

    /** Locks in id order, as `retire` does, so that the two never wait on each other in a circle. */
    const revokeAllOfUser = SqlSchema.void({
      Request: Schema.String,
      execute: (userId) =>
        sql`UPDATE auth_sessions SET revoked_at = now() WHERE id IN (
              SELECT id FROM auth_sessions WHERE user_id = ${userId} AND revoked_at IS NULL ORDER BY id FOR UPDATE)
            AND revoked_at IS NULL`
    })

    /**
     * After a sign-in is written: ends the user's live sign-ins beyond the newest `keep`
     * (announced at commit, as every revocation is), and deletes a bounded batch of sign-ins that
     * can no longer be used: those that expired (oldest first) and the user's revoked ones.
     * Nothing else refers to a sign-in's row. One statement, one snapshot: the new sign-in is
     * counted, as it committed before; the sign-ins it revokes go at a later sign-in.
     *
     * Every row it changes is locked first, in id order, and judged live or not as it stands once
     * locked. Concurrent sign-ins of one user overlap in the rows they retire; taken in two
     * orders (the revocation's, then the deletion's), one statement held a row another was
     * waiting for while waiting for one that other held, and PostgreSQL ended it as a deadlock:
     * a sign-in answered 500.
     */
    const retire = SqlSchema.void({
      Request: Schema.Struct({ user_id: Schema.String, keep: Schema.Int, batch: Schema.Int }),
      execute: ({ batch, keep, user_id }) =>
        sql`WITH retiring AS (
              SELECT id, revoked_at IS NULL AND expires_at > now() AS live FROM auth_sessions
              WHERE id IN (
                (SELECT id FROM auth_sessions
                 WHERE user_id = ${user_id} AND revoked_at IS NULL AND expires_at > now()
                 ORDER BY created_at DESC, id DESC OFFSET ${keep})
                UNION ALL
                (SELECT id FROM auth_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT ${batch})
                UNION ALL
                (SELECT id FROM auth_sessions WHERE user_id = ${user_id} AND revoked_at IS NOT NULL LIMIT ${batch}))
              ORDER BY id
              FOR UPDATE),
            revoked AS (
              UPDATE auth_sessions s SET revoked_at = now() FROM retiring r WHERE s.id = r.id AND r.live)
            DELETE FROM auth_sessions s USING retiring r WHERE s.id = r.id AND NOT r.live`
    })

    return {
      insert: orDefect(insert),
      retire: orDefect(retire),
      findLive: orDefect(findLive),
      revoke: orDefect(revoke),
      revokeAllOfUser: orDefect(revokeAllOfUser)
    } as const
  })
}) {}
