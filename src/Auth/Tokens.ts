import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, DateTime, Effect, Option, Redacted } from "effect"
import { errors, jwtVerify, SignJWT } from "jose"
import { createHash, randomBytes, webcrypto } from "node:crypto"
import { AppConfig } from "../Config.js"

const ISSUER = "account-api"
const AUDIENCE = "account-api"
const ALGORITHM = "HS256"
const MIN_SECRET_BYTES = 32
/** Tokens whose signature is known good; past this many the memory starts again. */
const VERIFIED_CAPACITY = 10_000

export interface TokenClaims {
  readonly userId: string
  readonly signInId: string
}

export class TokenInvalid extends Error {
  readonly _tag = "TokenInvalid"
}

/**
 * The signing secret: `AUTH_SECRET`, or in development a generated one kept in
 * the data folder so tokens survive restarts. Production refuses to start
 * without one (D2).
 */
const loadSecret = Effect.gen(function*() {
  const config = yield* AppConfig
  if (Option.isSome(config.authSecret)) {
    const secret = Redacted.value(config.authSecret.value)
    if (Buffer.byteLength(secret, "utf8") < MIN_SECRET_BYTES) {
      return yield* Effect.dieMessage(`AUTH_SECRET must be at least ${MIN_SECRET_BYTES} bytes`)
    }
    return secret
  }
  if (config.isProduction) {
    return yield* Effect.dieMessage("AUTH_SECRET is required when NODE_ENV=production")
  }
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const file = path.join(config.dataDir, "auth-secret")
  if (yield* fs.exists(file)) {
    const kept = (yield* fs.readFileString(file)).trim()
    // A damaged or hand-edited file must not weaken the key: the same floor as AUTH_SECRET.
    if (Buffer.byteLength(kept, "utf8") < MIN_SECRET_BYTES) {
      return yield* Effect.dieMessage(
        `the development secret in ${file} is shorter than ${MIN_SECRET_BYTES} bytes; delete the file to generate a new one`
      )
    }
    return kept
  }
  const secret = randomBytes(48).toString("base64url")
  yield* fs.makeDirectory(config.dataDir, { recursive: true })
  yield* fs.writeFileString(file, secret, { mode: 0o600 })
  yield* Effect.logWarning(`AUTH_SECRET is not set; using a generated development secret in ${file}`)
  return secret
}).pipe(Effect.orDie, Effect.provide(NodeContext.layer))

/** Signed bearer tokens: HS256 JWS with `sub`, `sid`, `iat`, `exp`, `iss`, `aud` and a `kid` (D2). */
export class Tokens extends Effect.Service<Tokens>()("Auth/Tokens", {
  effect: Effect.gen(function*() {
    const secret = yield* loadSecret
    // Imported once: handed raw bytes, jose imports a CryptoKey on every sign and verify.
    const key = yield* Effect.promise(() =>
      webcrypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
        "sign",
        "verify"
      ])
    )
    // The key id is derived from the key, so a rotated secret is told apart without extra configuration.
    const kid = createHash("sha256").update(secret).digest("base64url").slice(0, 16)

    const sign = (claims: TokenClaims, expiresAt: DateTime.Utc) =>
      Effect.promise(() =>
        new SignJWT({ sid: claims.signInId })
          .setProtectedHeader({ alg: ALGORITHM, kid, typ: "JWT" })
          .setSubject(claims.userId)
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setIssuedAt()
          .setExpirationTime(Math.floor(DateTime.toEpochMillis(expiresAt) / 1000))
          .sign(key)
      )

    const verifySignature = (token: string) =>
      Effect.tryPromise({
        try: () =>
          jwtVerify(token, key, {
            algorithms: [ALGORITHM],
            issuer: ISSUER,
            audience: AUDIENCE,
            requiredClaims: ["exp", "iat", "sub", "sid"]
          }),
        catch: (error) => new TokenInvalid(error instanceof errors.JOSEError ? error.code : "invalid")
      }).pipe(
        // A token signed under another key id is not ours, even if the secret happens to verify it.
        Effect.filterOrFail(({ protectedHeader }) => protectedHeader.kid === kid, () => new TokenInvalid("kid")),
        Effect.flatMap(({ payload }) =>
          typeof payload.sub === "string" && typeof payload.sid === "string" && typeof payload.exp === "number"
            ? Effect.succeed({
              claims: { userId: payload.sub, signInId: payload.sid },
              expiresAtMillis: payload.exp * 1000
            })
            : Effect.fail(new TokenInvalid("claims"))
        )
      )

    // A client sends the same token with every request: its signature is checked once, and
    // its expiry every time. Only tokens that verified are kept, so garbage cannot fill this.
    const verified = new Map<string, { readonly claims: TokenClaims; readonly expiresAtMillis: number }>()

    const verify = (token: string): Effect.Effect<TokenClaims, TokenInvalid> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const known = verified.get(token)
        if (known !== undefined && known.expiresAtMillis > now) return Effect.succeed(known.claims)
        return verifySignature(token).pipe(Effect.map((checked) => {
          if (verified.size >= VERIFIED_CAPACITY) verified.clear()
          verified.set(token, checked)
          return checked.claims
        }))
      })

    return { sign, verify } as const
  })
}) {}
