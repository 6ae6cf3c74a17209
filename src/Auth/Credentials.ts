import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Accounts, AccountsError, userFound } from "../Accounts.js"
import { InvalidCredentials } from "../Domain/SignIn.js"
import { Passwords } from "./Passwords.js"
import { SignInsRepo } from "./Repo.js"
import { heardByEveryProcess } from "./SignInCache.js"

const MIN_PASSWORD_LENGTH = 12

const checkPassword = (password: string) =>
  password.length >= MIN_PASSWORD_LENGTH
    ? Effect.void
    : Effect.fail(new AccountsError({ message: `password must be at least ${MIN_PASSWORD_LENGTH} characters` }))

/**
 * Passwords and what they open: checking one at sign-in, and the operators'
 * commands that set one or shut a user out (D2, D10). Accounts keeps the user
 * records; what touches a password hash or a sign-in is decided here,
 * so Accounts needs neither argon2 nor the sign-ins table.
 */
export class Credentials extends Effect.Service<Credentials>()("Auth/Credentials", {
  effect: Effect.gen(function*() {
    const accounts = yield* Accounts
    const passwords = yield* Passwords
    const signIns = yield* SignInsRepo
    const sql = yield* SqlClient.SqlClient

    const createUser = Effect.fn("Credentials.createUser")(function*(input: {
      readonly email: string
      readonly name: string
      readonly isAdmin: boolean
      readonly isOperator?: boolean
      readonly organisationId: Option.Option<string>
      readonly password: string
    }) {
      yield* checkPassword(input.password)
      const { password, ...user } = input
      return yield* accounts.createUser({ ...user, passwordHash: yield* passwords.hashPassword(password) })
    })

    /**
     * A change to a user, and the end of every one of their sign-ins, in one transaction (D2, D10).
     * It returns once every API process has heard, so that a request sent after it is refused by
     * all of them, not only once the announcement reaches each.
     */
    const endingSignIns = <E>(change: Effect.Effect<Option.Option<{ readonly id: string }>, E>) =>
      Effect.gen(function*() {
        const user = yield* change
        if (Option.isSome(user)) yield* signIns.revokeAllOfUser(user.value.id)
        return user
      }).pipe(
        sql.withTransaction,
        Effect.catchTag("SqlError", Effect.die),
        Effect.tap((user) =>
          Option.isSome(user) ? Effect.provideService(heardByEveryProcess, SqlClient.SqlClient, sql) : Effect.void
        )
      )

    /** Sets a new password and ends every sign-in of the user (D2). */
    const resetPassword = Effect.fn("Credentials.resetPassword")(function*(email: string, password: string) {
      yield* checkPassword(password)
      const passwordHash = yield* passwords.hashPassword(password)
      return yield* userFound(yield* endingSignIns(accounts.setPasswordHash(email, passwordHash)), email)
    })

    /** Disables a user and ends every one of their sign-ins (D10). */
    const disableUser = Effect.fn("Credentials.disableUser")(function*(email: string) {
      return yield* userFound(yield* endingSignIns(accounts.setDisabled(email, true)), email)
    })

    /** The user whose password this is; an unknown email costs a hash all the same (D2). */
    const verify = (email: string, password: string) =>
      Effect.gen(function*() {
        const user = yield* accounts.findUserByEmail(email)
        const ok = yield* passwords.verifyPassword(
          Option.match(user, { onNone: () => null, onSome: (u) => u.password_hash }),
          password
        )
        // A disabled user is told what a wrong password is told (D10): nothing about the account.
        if (!ok || Option.isNone(user) || user.value.disabled) {
          return yield* new InvalidCredentials({ detail: "The email or password is wrong." })
        }
        return user.value
      })

    return { createUser, resetPassword, disableUser, verify } as const
  }),
  dependencies: [Accounts.Default, Passwords.Default, SignInsRepo.Default]
}) {}
