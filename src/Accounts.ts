import { SqlClient } from "@effect/sql"
import { Data, Effect, Option } from "effect"
import { AccountsRepo, type UserRow } from "./Accounts/Repo.js"
import { Passwords } from "./Auth/Passwords.js"
import { SessionsRepo } from "./Auth/Repo.js"
import { Account, type AccountKind, isUuid, normalizeEmail, User } from "./Domain/Account.js"

/** Operator-facing failures (CLI); clients never see these. */
export class AccountsError extends Data.TaggedError("AccountsError")<{ readonly message: string }> {}

/** Built from rows their schema has decoded: validating again is redundant, and it runs on every request. */
const decoded = { disableValidation: true } as const

/** The account is the user's organisation when they have one, otherwise the user (D3). */
export const accountOf = (row: Pick<UserRow, "id" | "organisation_id">): Account =>
  row.organisation_id === null
    ? new Account({ kind: "user", id: row.id }, decoded)
    : new Account({ kind: "client", id: row.organisation_id }, decoded)

export const userOf = (row: UserRow): User =>
  new User({ id: row.id, email: row.email, name: row.name, is_admin: row.is_admin }, decoded)

const MIN_PASSWORD_LENGTH = 12

/** The user a command named by email, or the operator's error saying there is none. */
const userFound = <A>(user: Option.Option<A>, email: string): Effect.Effect<A, AccountsError> =>
  Option.match(user, {
    onNone: () => Effect.fail(new AccountsError({ message: `no user with email ${email}` })),
    onSome: Effect.succeed
  })

/** Users, organisations and repositories, as operators create them (D10). */
export class Accounts extends Effect.Service<Accounts>()("Accounts", {
  effect: Effect.gen(function*() {
    const repo = yield* AccountsRepo
    const passwords = yield* Passwords
    const sessions = yield* SessionsRepo
    const sql = yield* SqlClient.SqlClient

    const checkPassword = (password: string) =>
      password.length >= MIN_PASSWORD_LENGTH
        ? Effect.void
        : Effect.fail(new AccountsError({ message: `password must be at least ${MIN_PASSWORD_LENGTH} characters` }))

    const createOrganisation = Effect.fn("Accounts.createOrganisation")(function*(name: string) {
      if (name.trim() === "") return yield* new AccountsError({ message: "name must not be empty" })
      return yield* repo.insertOrganisation(name.trim()).pipe(Effect.orDie)
    })

    const createUser = Effect.fn("Accounts.createUser")(function*(input: {
      readonly email: string
      readonly name: string
      readonly isAdmin: boolean
      readonly isOperator?: boolean
      readonly organisationId: Option.Option<string>
      readonly password: string
    }) {
      yield* checkPassword(input.password)
      const email = normalizeEmail(input.email)
      if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
        return yield* new AccountsError({ message: `not an email address: ${email}` })
      }
      if (Option.isSome(input.organisationId)) {
        const organisationId = input.organisationId.value
        const exists = isUuid(organisationId)
          ? yield* repo.organisationExists(organisationId).pipe(Effect.orDie)
          : Option.none()
        if (Option.isNone(exists)) {
          return yield* new AccountsError({ message: `no organisation ${organisationId}` })
        }
      }
      if (Option.isSome(yield* repo.findUserByEmail(email).pipe(Effect.orDie))) {
        return yield* new AccountsError({ message: `a user with email ${email} exists` })
      }
      const password_hash = yield* passwords.hashPassword(input.password)
      return yield* Effect.gen(function*() {
        const user = yield* repo.insertUser({
          email,
          name: input.name,
          is_admin: input.isAdmin,
          is_operator: input.isOperator ?? false,
          password_hash
        })
        if (Option.isSome(input.organisationId)) {
          yield* repo.insertMembership({ user_id: user.id, organisation_id: input.organisationId.value })
        }
        return user
      }).pipe(sql.withTransaction, Effect.orDie)
    })

    /** A change to a user, and the end of every one of their sign-in sessions, in one transaction (D2, D10). */
    const endingSessions = <E>(change: Effect.Effect<Option.Option<{ readonly id: string }>, E>) =>
      Effect.gen(function*() {
        const user = yield* change
        if (Option.isSome(user)) yield* sessions.revokeAllOfUser(user.value.id)
        return user
      }).pipe(sql.withTransaction, Effect.orDie)

    /** Sets a new password and ends every sign-in session of the user, in one transaction (D2). */
    const resetPassword = Effect.fn("Accounts.resetPassword")(function*(email: string, password: string) {
      yield* checkPassword(password)
      const password_hash = yield* passwords.hashPassword(password)
      return yield* userFound(yield* endingSessions(repo.updatePasswordHash({ email: normalizeEmail(email), password_hash })), email)
    })

    /** Grants or withdraws the queue dashboard's role (D9). */
    const setOperator = Effect.fn("Accounts.setOperator")(function*(email: string, isOperator: boolean) {
      const updated = yield* repo.updateOperator({ email: normalizeEmail(email), is_operator: isOperator }).pipe(Effect.orDie)
      return yield* userFound(updated, email)
    })

    /** Disables a user and ends every one of their sessions, in one transaction (D10). */
    const disableUser = Effect.fn("Accounts.disableUser")(function*(email: string) {
      return yield* userFound(yield* endingSessions(repo.updateDisabled({ email: normalizeEmail(email), disabled: true })), email)
    })

    const enableUser = Effect.fn("Accounts.enableUser")(function*(email: string) {
      const updated = yield* repo.updateDisabled({ email: normalizeEmail(email), disabled: false }).pipe(Effect.orDie)
      return yield* userFound(updated, email)
    })

    const listOrganisations = repo.listOrganisations().pipe(Effect.orDie)

    const listUsers = Effect.fn("Accounts.listUsers")(function*(organisationId: Option.Option<string>) {
      if (Option.isSome(organisationId) && !isUuid(organisationId.value)) {
        return yield* new AccountsError({ message: `no organisation ${organisationId.value}` })
      }
      return yield* repo.listUsers(Option.getOrNull(organisationId)).pipe(Effect.orDie)
    })

    const listRepositories = Effect.fn("Accounts.listRepositories")(function*(accountId: string) {
      const kind = yield* accountKind(accountId)
      return yield* repo.listRepositories({ account_kind: kind, account_id: accountId }).pipe(Effect.orDie)
    })

    const createRepository = Effect.fn("Accounts.createRepository")(function*(accountId: string, name: string) {
      if (name.trim() === "") return yield* new AccountsError({ message: "name must not be empty" })
      const kind = yield* accountKind(accountId)
      return yield* repo.insertRepository({ account_kind: kind, account_id: accountId, name: name.trim() }).pipe(
        Effect.orDie
      )
    })

    /**
     * The accounts among the ids, by id: an account id is an organisation id,
     * or the id of a user without an organisation. One statement for any number.
     */
    const findAccounts = (accountIds: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, Account>> => {
      const ids = [...new Set(accountIds.filter(isUuid))]
      if (ids.length === 0) return Effect.succeed(new Map())
      return repo.findAccounts(ids).pipe(
        Effect.map((rows) => new Map(rows.map((row) => [row.id, new Account(row, decoded)]))),
        Effect.orDie
      )
    }

    /** The account with this id, if any. */
    const findAccount = (accountId: string): Effect.Effect<Option.Option<Account>> =>
      Effect.map(findAccounts([accountId]), (found) => Option.fromNullable(found.get(accountId)))

    const accountKind = (accountId: string): Effect.Effect<AccountKind, AccountsError> =>
      Effect.flatMap(findAccount(accountId), Option.match({
        onNone: () => Effect.fail(new AccountsError({ message: `no account ${accountId}` })),
        onSome: (account) => Effect.succeed(account.kind)
      }))

    return {
      findAccount,
      findAccounts,
      findUserByEmail: (email: string) => repo.findUserByEmail(normalizeEmail(email)).pipe(Effect.orDie),
      createOrganisation,
      createUser,
      resetPassword,
      setOperator,
      disableUser,
      enableUser,
      listOrganisations,
      listUsers,
      listRepositories,
      createRepository
    } as const
  }),
  dependencies: [AccountsRepo.Default, Passwords.Default, SessionsRepo.Default]
}) {}
