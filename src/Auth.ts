import { Cause, DateTime, Duration, Effect, Exit, Option } from "effect"
import { Credentials } from "./Auth/Credentials.js"
import { LoginThrottle } from "./Auth/LoginThrottle.js"
import type { LiveSignInRow } from "./Auth/Repo.js"
import { SignInsRepo } from "./Auth/Repo.js"
import { SignInCache } from "./Auth/SignInCache.js"
import { Tokens } from "./Auth/Tokens.js"
import { AppConfig } from "./Config.js"
import { accountOf, CurrentUser, isUuid, normalizeEmail, SignIn, userOf } from "./Domain/Account.js"
import { type RateLimited, Unauthenticated } from "./Domain/Errors.js"
import { type InvalidCredentials, LoginResponse, MeResponse } from "./Domain/SignIn.js"

/** Live sign-ins one user may hold; a new one beyond ends the oldest (issue 22.3). */
export const LIVE_SIGN_INS = 50
/** Ended sign-ins deleted per sign-in, of the user's own and of any expired: more than one sign-in adds. */
const PRUNED_PER_SIGN_IN = 100

const unauthenticated = (detail: string) => new Unauthenticated({ detail })

/**
 * For values made from decoded rows. Validating them again is not just
 * redundant: for classes with transformed fields (dates, nested classes)
 * Effect builds the validator anew on every construction.
 */
const decoded = { disableValidation: true } as const

const callerOf = (row: LiveSignInRow) =>
  CurrentUser.of({
    user: userOf(row),
    isOperator: row.is_operator,
    account: accountOf(row),
    signIn: new SignIn({ id: row.sign_in_id, expires_at: row.expires_at }, decoded)
  })

/** Sign-in, token checks and sign-out (seed §5, D2). */
export class Auth extends Effect.Service<Auth>()("Auth", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const credentials = yield* Credentials
    const tokens = yield* Tokens
    const throttle = yield* LoginThrottle
    const signIns = yield* SignInsRepo
    const cache = yield* SignInCache

    const login = Effect.fn("Auth.login")(function*(typedEmail: string, password: string, clientAddress: string) {
      const email = normalizeEmail(typedEmail)
      const attempt = yield* throttle.take(email, clientAddress)
      // The address alone is at its failure limit: slowed, not refused, so that a user behind the
      // same proxy or NAT as an attacker still gets in with their password (issue 22.4).
      if (attempt.slowed) yield* Effect.sleep(throttle.slowDown)
      const user = yield* credentials.verify(email, password).pipe(
        // Only a wrong email or password stays counted; anything else gives the attempt back.
        Effect.onExit((exit) =>
          Exit.isFailure(exit) &&
            Cause.failureOption(exit.cause).pipe(Option.exists((error) => error._tag === "InvalidCredentials"))
            ? Effect.void
            : throttle.giveBack(attempt, Exit.isSuccess(exit)).pipe(Effect.ignore)
        ),
        Effect.catchTag(
          "InvalidCredentials",
          (error) => Effect.fail<InvalidCredentials | RateLimited>(attempt.slowed ? throttle.refused(attempt) : error)
        )
      )
      const now = yield* DateTime.now
      const expiresAt = DateTime.addDuration(now, config.tokenTtl)
      const signIn = yield* signIns.insert({ user_id: user.id, expires_at: expiresAt })
      // At most LIVE_SIGN_INS per user: the oldest beyond end (their tokens answer 401 from now on),
      // and a bounded batch of ended sign-ins goes, so the table holds what can still be used.
      yield* signIns.retire({ user_id: user.id, keep: LIVE_SIGN_INS, batch: PRUNED_PER_SIGN_IN })
      const accessToken = yield* tokens.sign({ userId: user.id, signInId: signIn.id }, expiresAt)
      // Built of values already checked, and encoded by the contract on the way out.
      return new LoginResponse({
        access_token: accessToken,
        token_type: "bearer",
        expires_at: expiresAt,
        expires_in: Math.floor(Duration.toSeconds(config.tokenTtl)),
        user: userOf(user)
      }, decoded)
    })

    /**
     * Verifies the signature and claims, then that the sign-in is still
     * live (fails closed): from this process's memory of live sign-ins, or the
     * database while that memory cannot be trusted. Runs on every authenticated
     * request, so it is not traced: a traced function captures two stack traces per call.
     */
    const authenticate = Effect.fnUntraced(function*(token: string) {
      if (token === "") return yield* unauthenticated("A bearer token is required; sign in again.")
      const claims = yield* tokens.verify(token).pipe(
        Effect.mapError(() => unauthenticated("The token is invalid or expired; sign in again."))
      )
      if (!isUuid(claims.signInId) || !isUuid(claims.userId)) {
        return yield* unauthenticated("The token is invalid; sign in again.")
      }
      const caller = yield* cache.through(
        claims.signInId,
        claims.userId,
        signIns.findLive({ sign_in_id: claims.signInId, user_id: claims.userId }).pipe(
          Effect.map(Option.map(callerOf))
        )
      )
      if (Option.isNone(caller)) return yield* unauthenticated("The session has ended; sign in again.")
      return caller.value
    })

    const me = (current: CurrentUser["Type"]) =>
      new MeResponse({ user: current.user, account: current.account, session: current.signIn }, decoded)

    const logout = Effect.fn("Auth.logout")(function*(current: CurrentUser["Type"]) {
      yield* signIns.revoke(current.signIn.id)
      cache.forget(current.signIn.id)
    })

    /**
     * Whether the caller's sign-in is still live, as the next request of its token would find it
     * (D2): from memory while that can be trusted, else the database. A sign-in that cannot be
     * checked counts as ended (fails closed).
     */
    const stillSignedIn = (current: CurrentUser["Type"]) =>
      cache.through(
        current.signIn.id,
        current.user.id,
        signIns.findLive({ sign_in_id: current.signIn.id, user_id: current.user.id }).pipe(
          Effect.map(Option.map(callerOf))
        )
      ).pipe(
        Effect.map(Option.isSome),
        Effect.catchAllDefect(() => Effect.succeed(false))
      )

    /**
     * For an answer that outlives its request (an event stream): `wake` is called whenever a change
     * may have ended the caller's sign-in, so that it asks `stillSignedIn` again. Undone with the scope.
     */
    const watchSignIn = (current: CurrentUser["Type"], wake: () => void) =>
      Effect.acquireRelease(
        Effect.sync(() => cache.watch(current.signIn.id, current.user.id, wake)),
        (stop) => Effect.sync(stop)
      )

    return { login, authenticate, me, logout, stillSignedIn, watchSignIn } as const
  }),
  dependencies: [Credentials.Default, Tokens.Default, LoginThrottle.Default, SignInsRepo.Default, SignInCache.Default]
}) {}
