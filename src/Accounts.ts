import { SqlClient } from "@effect/sql"
import { Data, Effect, Option } from "effect"
import { AccountsRepo } from "./Accounts/Repo.js"
import { Account, type AccountKind, EMAIL_PATTERN, isUuid, normalizeEmail } from "./Domain/Account.js"

/** Operator-facing failures (CLI); clients never see these. */
export class AccountsError extends Data.TaggedError("AccountsError")<{ readonly message: string }> {}

/** Built from rows their schema has decoded: validating again is redundant, and it runs on every request. */
const decoded = { disableValidation: true } as const

/** Accounts, and owners of repositories and users, a process keeps in memory once found (`findAccounts`, `findOwners`). */
const ACCOUNTS_KNOWN = 100_000

/** The user a command named by email, or the operator's error saying there is none. */
export const userFound = <A>(user: Option.Option<A>, email: string): Effect.Effect<A, AccountsError> =>
  Option.match(user, {
    onNone: () => Effect.fail(new AccountsError({ message: `no user with email ${email}` })),
    onSome: Effect.succeed
  })

/**
 * Users, organisations and repositories, as operators create them (D10). Credentials and
 * sign-ins are Auth's: a user arrives here with a password hash already made.
 */
export class Accounts extends Effect.Service<Accounts>()("Accounts", {
  effect: Effect.gen(function*() {
    const repo = yield* AccountsRepo
    const sql = yield* SqlClient.SqlClient

    const createOrganisation = Effect.fn("Accounts.createOrganisation")(function*(name: string) {
      if (name.trim() === "") return yield* new AccountsError({ message: "name must not be empty" })
      return yield* repo.insertOrganisation(name.trim())
    })

    const createUser = Effect.fn("Accounts.createUser")(function*(input: {
      readonly email: string
      readonly name: string
      readonly isAdmin: boolean
      readonly isOperator?: boolean
      readonly organisationId: Option.Option<string>
      readonly passwordHash: string
    }) {
      const email = normalizeEmail(input.email)
      if (!EMAIL_PATTERN.test(email)) {
        return yield* new AccountsError({ message: `not an email address: ${email}` })
      }
      if (Option.isSome(input.organisationId)) {
        const organisationId = input.organisationId.value
        const exists = isUuid(organisationId) ? yield* repo.organisationExists(organisationId) : Option.none()
        if (Option.isNone(exists)) {
          return yield* new AccountsError({ message: `no organisation ${organisationId}` })
        }
      }
      return yield* Effect.gen(function*() {
        const user = yield* repo.insertUser({
          email,
          name: input.name,
          is_admin: input.isAdmin,
          is_operator: input.isOperator ?? false,
          password_hash: input.passwordHash
        })
        if (Option.isSome(input.organisationId)) {
          yield* repo.insertMembership({ user_id: user.id, organisation_id: input.organisationId.value })
        }
        return user
      }).pipe(
        sql.withTransaction,
        Effect.catchTags({
          EmailTaken: () => Effect.fail(new AccountsError({ message: `a user with email ${email} exists` })),
          SqlError: Effect.die
        })
      )
    })

    /** The user's id, once their password hash is replaced; none when no user has the email. */
    const setPasswordHash = (email: string, passwordHash: string) =>
      repo.updatePasswordHash({ email: normalizeEmail(email), password_hash: passwordHash })

    /** Grants or withdraws the queue dashboard's role (D9). */
    const setOperator = Effect.fn("Accounts.setOperator")(function*(email: string, isOperator: boolean) {
      return yield* userFound(
        yield* repo.updateOperator({ email: normalizeEmail(email), is_operator: isOperator }),
        email
      )
    })

    /** Disables or enables a user; none when no user has the email. Ending their sign-ins is Auth's part. */
    const setDisabled = (email: string, disabled: boolean) =>
      repo.updateDisabled({ email: normalizeEmail(email), disabled })

    const enableUser = Effect.fn("Accounts.enableUser")(function*(email: string) {
      return yield* userFound(yield* setDisabled(email, false), email)
    })

    /**
     * Owners found before, by `repository/ID` or `user/ID`. A repository stays its account's for
     * good, and a user's account is settled in the transaction that makes them (as for
     * `known` below): what was found is kept; what was not is asked again.
     */
    const knownOwners = new Map<string, Account>()

    /**
     * Which of the repositories and users belong to which account (D16's attribution): `owner`
     * answers the account of a repository or user id, none for an unknown one. One statement for
     * any number not known yet, none when all are (a settlement batch's usual case).
     */
    const findOwners = (ids: {
      readonly repositoryIds: ReadonlyArray<string>
      readonly userIds: ReadonlyArray<string>
    }): Effect.Effect<{ readonly owner: (owned: "repository" | "user", id: string) => Account | undefined }> => {
      const found = new Map<string, Account>()
      const unknown = { repository: new Set<string>(), user: new Set<string>() }
      const look = (owned: "repository" | "user", list: ReadonlyArray<string>) => {
        for (const id of list) {
          if (!isUuid(id)) continue
          // PostgreSQL answers a uuid in lower case, whatever case it was asked in.
          const key = `${owned}/${id.toLowerCase()}`
          const account = knownOwners.get(key)
          if (account !== undefined) found.set(key, account)
          else unknown[owned].add(id.toLowerCase())
        }
      }
      look("repository", ids.repositoryIds)
      look("user", ids.userIds)
      const answer = { owner: (owned: "repository" | "user", id: string) => found.get(`${owned}/${id.toLowerCase()}`) }
      if (unknown.repository.size === 0 && unknown.user.size === 0) return Effect.succeed(answer)
      return Effect.map(
        repo.findOwners({ repository_ids: [...unknown.repository], user_ids: [...unknown.user] }),
        (rows) => {
          // Bounded as `known` is: past this many the cache starts again.
          if (knownOwners.size + rows.length > ACCOUNTS_KNOWN) knownOwners.clear()
          for (const row of rows) {
            const key = `${row.owned}/${row.id}`
            const account = new Account({ kind: row.account_kind, id: row.account_id }, decoded)
            knownOwners.set(key, account)
            found.set(key, account)
          }
          return answer
        }
      )
    }

    const listOrganisations = repo.listOrganisations()

    const listUsers = Effect.fn("Accounts.listUsers")(function*(organisationId: Option.Option<string>) {
      if (Option.isSome(organisationId) && !isUuid(organisationId.value)) {
        return yield* new AccountsError({ message: `no organisation ${organisationId.value}` })
      }
      return yield* repo.listUsers(Option.getOrNull(organisationId))
    })

    const listRepositories = Effect.fn("Accounts.listRepositories")(function*(accountId: string) {
      const kind = yield* accountKind(accountId)
      return yield* repo.listRepositories({ account_kind: kind, account_id: accountId })
    })

    const createRepository = Effect.fn("Accounts.createRepository")(function*(accountId: string, name: string) {
      if (name.trim() === "") return yield* new AccountsError({ message: "name must not be empty" })
      const kind = yield* accountKind(accountId)
      return yield* repo.insertRepository({ account_kind: kind, account_id: accountId, name: name.trim() })
    })

    /**
     * Accounts found before, by id. An account stays one, of its kind, for good: nothing deletes
     * users or organisations, and a user joins an organisation only in the transaction that makes
     * them. So what was found is kept (no notification needed); what was not is asked again.
     */
    const known = new Map<string, Account>()

    /**
     * The accounts among the ids, by id: an account id is an organisation id,
     * or the id of a user without an organisation. One statement for any number not known yet,
     * none when all are (a settlement batch's usual case).
     */
    const findAccounts = (accountIds: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, Account>> => {
      const found = new Map<string, Account>()
      const unknown = new Set<string>()
      for (const id of accountIds) {
        const account = known.get(id)
        if (account !== undefined) found.set(id, account)
        else if (isUuid(id)) unknown.add(id)
      }
      if (unknown.size === 0) return Effect.succeed(found)
      return repo.findAccounts([...unknown]).pipe(
        Effect.map((rows) => {
          // Bounded: past this many the cache starts again (each entry is an id and its kind).
          if (known.size + rows.length > ACCOUNTS_KNOWN) known.clear()
          for (const row of rows) {
            const account = new Account(row, decoded)
            known.set(row.id, account)
            found.set(row.id, account)
          }
          return found
        })
      )
    }

    /** The account with this id, if any. */
    const findAccount = (accountId: string): Effect.Effect<Option.Option<Account>> =>
      Effect.map(findAccounts([accountId]), (found) => Option.fromNullable(found.get(accountId)))

    const accountKind = (accountId: string): Effect.Effect<AccountKind, AccountsError> =>
      Effect.flatMap(
        findAccount(accountId),
        Option.match({
          onNone: () => Effect.fail(new AccountsError({ message: `no account ${accountId}` })),
          onSome: (account) => Effect.succeed(account.kind)
        })
      )

    return {
      findAccount,
      findAccounts,
      findUserByEmail: (email: string) => repo.findUserByEmail(normalizeEmail(email)),
      createOrganisation,
      createUser,
      setPasswordHash,
      setOperator,
      setDisabled,
      enableUser,
      listOrganisations,
      listUsers,
      listRepositories,
      createRepository,
      findOwners
    } as const
  }),
  dependencies: [AccountsRepo.Default]
}) {}
