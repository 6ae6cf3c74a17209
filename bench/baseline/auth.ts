import { jwtVerify } from "jose"
import { webcrypto } from "node:crypto"
import type pg from "pg"

/**
 * What the service's authentication middleware does per request (src/Auth.ts
 * `authenticate`, src/Auth/Tokens.ts `verify`, src/Auth/Repo.ts `findLive`),
 * written plainly: verify the HS256 token, then one query for the live session,
 * its user and their account.
 */

const ISSUER = "account-api"
const AUDIENCE = "account-api"
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The same text as `findLive`, so PostgreSQL does the same work for both servers. */
const FIND_LIVE_SESSION = `SELECT u.id, u.email, u.name, u.is_admin, u.password_hash, m.organisation_id,
                   s.id AS session_id, s.expires_at
            FROM auth_sessions s
            JOIN users u ON u.id = s.user_id
            LEFT JOIN memberships m ON m.user_id = u.id
            WHERE s.id = $1 AND s.user_id = $2
              AND s.revoked_at IS NULL AND s.expires_at > now()`

interface LiveSessionRow {
  readonly id: string
  readonly email: string
  readonly name: string
  readonly is_admin: boolean
  readonly organisation_id: string | null
  readonly session_id: string
  readonly expires_at: Date
}

/** Who is calling, shaped as the service's `CurrentUser`. */
export interface Caller {
  readonly user: { readonly id: string; readonly email: string; readonly name: string; readonly is_admin: boolean }
  readonly account: { readonly kind: "client" | "user"; readonly id: string }
  readonly session: { readonly id: string; readonly expires_at: string }
}

export const makeAuthenticate = async (pool: pg.Pool, secret: string) => {
  // As the service (src/Auth/Tokens.ts): the key is imported once, not by jose on every call.
  const key = await webcrypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    [
      "verify"
    ]
  )

  /** The caller, or undefined for any token the service would answer 401. */
  return async (authorization: string | undefined): Promise<Caller | undefined> => {
    // As the service's bearer security: whatever follows the seven characters of "Bearer ".
    const token = (authorization ?? "").slice("Bearer ".length)
    if (token === "") return undefined
    const claims = await jwtVerify(token, key, { algorithms: ["HS256"], issuer: ISSUER, audience: AUDIENCE }).then(
      ({ payload }) => payload,
      () => undefined
    )
    const userId = claims?.sub
    const sessionId = claims?.sid
    if (typeof userId !== "string" || typeof sessionId !== "string" || !UUID.test(userId) || !UUID.test(sessionId)) {
      return undefined
    }
    const { rows } = await pool.query<LiveSessionRow>(FIND_LIVE_SESSION, [sessionId, userId])
    const row = rows[0]
    if (row === undefined) return undefined
    return {
      user: { id: row.id, email: row.email, name: row.name, is_admin: row.is_admin },
      account: row.organisation_id === null
        ? { kind: "user", id: row.id }
        : { kind: "client", id: row.organisation_id },
      session: { id: row.session_id, expires_at: row.expires_at.toISOString() }
    }
  }
}
