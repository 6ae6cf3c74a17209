import { Cause, DateTime, Duration, Effect, Exit, Option } from "effect"
import { Credentials } from "./Auth/Credentials.js"
import { LoginThrottle } from "./Auth/LoginThrottle.js"
import type { LiveSessionRow } from "./Auth/Repo.js"
import { SessionsRepo } from "./Auth/Repo.js"
import { SessionCache } from "./Auth/SessionCache.js"
import { Tokens } from "./Auth/Tokens.js"
import { AppConfig } from "./Config.js"
import { accountOf, CurrentUser, isUuid, normalizeEmail, SignInSession, userOf } from "./Domain/Account.js"
import { Unauthenticated } from "./Domain/Errors.js"
import { LoginResponse, MeResponse } from "./Domain/Session.js"

const unauthenticated = (detail: string) => new Unauthenticated({ detail })

/**
 * For values made from decoded rows. Validating them again is not just
 * redundant: for classes with transformed fields (dates, nested classes)
 * Effect builds the validator anew on every construction.
 */
const decoded = { disableValidation: true } as const

const callerOf = (row: LiveSessionRow) =>
  CurrentUser.of({
    user: userOf(row),
    isOperator: row.is_operator,
    account: accountOf(row),
    session: new SignInSession({ id: row.session_id, expires_at: row.expires_at }, decoded)
  })

/** Sign-in, token checks and sign-out (seed §5, D2). */
export class Auth extends Effect.Service<Auth>()("Auth", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const credentials = yield* Credentials
    const tokens = yield* Tokens
    const throttle = yield* LoginThrottle
    const sessions = yield* SessionsRepo
    const cache = yield* SessionCache

    const login = Effect.fn("Auth.login")(function*(typedEmail: string, password: string, clientAddress: string) {
      const email = normalizeEmail(typedEmail)
      const attempt = yield* throttle.take(email, clientAddress)
      const user = yield* credentials.verify(email, password).pipe(
        // Only a wrong email or password stays counted; anything else gives the attempt back.
        Effect.onExit((exit) =>
          Exit.isFailure(exit) &&
            Cause.failureOption(exit.cause).pipe(Option.exists((error) => error._tag === "InvalidCredentials"))
            ? Effect.void
            : throttle.giveBack(attempt, Exit.isSuccess(exit)).pipe(Effect.ignore)
        )
      )
      const now = yield* DateTime.now
      const expiresAt = DateTime.addDuration(now, config.tokenTtl)
      const session = yield* sessions.insert({ user_id: user.id, expires_at: expiresAt })
      const accessToken = yield* tokens.sign({ userId: user.id, sessionId: session.id }, expiresAt)
      return new LoginResponse({
        access_token: accessToken,
        token_type: "bearer",
        expires_at: expiresAt,
        expires_in: Math.floor(Duration.toSeconds(config.tokenTtl)),
        user: userOf(user)
      })
    })

    /**
     * Verifies the signature and claims, then that the sign-in session is still
     * live (fails closed): from this process's memory of live sessions, or the
     * database while that memory cannot be trusted. Runs on every authenticated
     * request, so it is not traced: a traced function captures two stack traces per call.
     */
    const authenticate = Effect.fnUntraced(function*(token: string) {
      if (token === "") return yield* unauthenticated("A bearer token is required; sign in again.")
      const claims = yield* tokens.verify(token).pipe(
        Effect.mapError(() => unauthenticated("The token is invalid or expired; sign in again."))
      )
      if (!isUuid(claims.sessionId) || !isUuid(claims.userId)) {
        return yield* unauthenticated("The token is invalid; sign in again.")
      }
      const caller = yield* cache.through(
        claims.sessionId,
        claims.userId,
        sessions.findLive({ session_id: claims.sessionId, user_id: claims.userId }).pipe(
          Effect.map(Option.map(callerOf))
        )
      )
      if (Option.isNone(caller)) return yield* unauthenticated("The session has ended; sign in again.")
      return caller.value
    })

    const me = (current: CurrentUser["Type"]) =>
      new MeResponse({ user: current.user, account: current.account, session: current.session }, decoded)

    const logout = Effect.fn("Auth.logout")(function*(current: CurrentUser["Type"]) {
      yield* sessions.revoke(current.session.id)
      cache.forget(current.session.id)
    })

    return { login, authenticate, me, logout } as const
  }),
  dependencies: [Credentials.Default, Tokens.Default, LoginThrottle.Default, SessionsRepo.Default, SessionCache.Default]
}) {}
