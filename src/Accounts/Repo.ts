import { SqlClient, SqlSchema } from "@effect/sql"
import { Data, Effect, Schema } from "effect"
import { AccountKind, UserRecord } from "../Domain/Account.js"
import { isSqlError, isUniqueViolation, orDefect } from "../Sql/Errors.js"

/** A user as operators list them (D10). */
export const UserListing = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  is_admin: Schema.Boolean,
  is_operator: Schema.Boolean,
  org_id: Schema.NullOr(Schema.String),
  disabled: Schema.Boolean
})

const Listed = Schema.Struct({ id: Schema.String, name: Schema.String, created_at: Schema.DateFromSelf })

const Id = Schema.Struct({ id: Schema.String })

/** A user with this email exists already. */
export class EmailTaken extends Data.TaggedError("EmailTaken")<{ readonly email: string }> {}

/** Users, organisations, memberships and repositories: SQL only, no decisions. Emails arrive normalised. */
export class AccountsRepo extends Effect.Service<AccountsRepo>()("Accounts/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const userColumns =
      sql`u.id, u.email, u.name, u.is_admin, u.is_operator, u.disabled_at IS NOT NULL AS disabled, u.password_hash,
                             m.organisation_id`

    const findUserByEmail = SqlSchema.findOne({
      Request: Schema.String,
      Result: UserRecord,
      execute: (email) =>
        sql`SELECT ${userColumns} FROM users u LEFT JOIN memberships m ON m.user_id = u.id
            WHERE u.email = ${email}`
    })

    const insertOrganisation = SqlSchema.single({
      Request: Schema.String,
      Result: Id,
      execute: (name) => sql`INSERT INTO organisations (name) VALUES (${name}) RETURNING id`
    })

    const organisationExists = SqlSchema.findOne({
      Request: Schema.String,
      Result: Id,
      execute: (id) => sql`SELECT id FROM organisations WHERE id = ${id}`
    })

    const insertUser = SqlSchema.single({
      Request: Schema.Struct({
        email: Schema.String,
        name: Schema.String,
        is_admin: Schema.Boolean,
        is_operator: Schema.Boolean,
        password_hash: Schema.String
      }),
      Result: Schema.Struct({ id: Schema.String, email: Schema.String }),
      execute: (user) => sql`INSERT INTO users ${sql.insert(user)} RETURNING id, email`
    })

    const insertMembership = SqlSchema.void({
      Request: Schema.Struct({ user_id: Schema.String, organisation_id: Schema.String }),
      execute: (membership) => sql`INSERT INTO memberships ${sql.insert(membership)}`
    })

    const updatePasswordHash = SqlSchema.findOne({
      Request: Schema.Struct({ email: Schema.String, password_hash: Schema.String }),
      Result: Id,
      execute: ({ email, password_hash }) =>
        sql`UPDATE users SET password_hash = ${password_hash}, updated_at = now()
            WHERE email = ${email} RETURNING id`
    })

    /** Grants or withdraws the dashboard role (D9); none when no user has the email. */
    const updateOperator = SqlSchema.findOne({
      Request: Schema.Struct({ email: Schema.String, is_operator: Schema.Boolean }),
      Result: Id,
      execute: ({ email, is_operator }) =>
        sql`UPDATE users SET is_operator = ${is_operator}, updated_at = now()
            WHERE email = ${email} RETURNING id`
    })

    /** Disables (with the time) or enables a user; none when no user has the email. */
    const updateDisabled = SqlSchema.findOne({
      Request: Schema.Struct({ email: Schema.String, disabled: Schema.Boolean }),
      Result: Id,
      execute: ({ disabled, email }) =>
        sql`UPDATE users SET disabled_at = CASE WHEN ${disabled} THEN coalesce(disabled_at, now()) END, updated_at = now()
            WHERE email = ${email} RETURNING id`
    })

    const listOrganisations = SqlSchema.findAll({
      Request: Schema.Void,
      Result: Listed,
      execute: () => sql`SELECT id, name, created_at FROM organisations ORDER BY created_at, id`
    })

    const listUsers = SqlSchema.findAll({
      Request: Schema.NullOr(Schema.String),
      Result: UserListing,
      execute: (organisationId) =>
        sql`SELECT u.id, u.email, u.name, u.is_admin, u.is_operator, m.organisation_id AS org_id,
                   u.disabled_at IS NOT NULL AS disabled
            FROM users u LEFT JOIN memberships m ON m.user_id = u.id
            WHERE ${organisationId}::uuid IS NULL OR m.organisation_id = ${organisationId}::uuid
            ORDER BY u.created_at, u.id`
    })

    const listRepositories = SqlSchema.findAll({
      Request: Schema.Struct({ account_kind: AccountKind, account_id: Schema.String }),
      Result: Listed,
      execute: ({ account_id, account_kind }) =>
        sql`SELECT id, name, created_at FROM repositories
            WHERE account_kind = ${account_kind} AND account_id = ${account_id}
            ORDER BY created_at, id`
    })

    /** Which of the ids are accounts, and of which kind: organisations, and users outside any organisation. */
    const findAccounts = SqlSchema.findAll({
      Request: Schema.Array(Schema.UUID),
      Result: Schema.Struct({ id: Schema.String, kind: AccountKind }),
      execute: (ids) =>
        sql`SELECT id, 'client' AS kind FROM organisations WHERE id = ANY(${ids}::uuid[])
            UNION ALL
            SELECT u.id, 'user' FROM users u
            WHERE u.id = ANY(${ids}::uuid[]) AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id)`
    })

    const insertRepository = SqlSchema.single({
      Request: Schema.Struct({ account_kind: AccountKind, account_id: Schema.String, name: Schema.String }),
      Result: Id,
      execute: (repository) => sql`INSERT INTO repositories ${sql.insert(repository)} RETURNING id`
    })

    /** The email is one user's already: the unique index, not a read before the write, decides (races included). */
    const insertUserOnce = (user: Parameters<typeof insertUser>[0]) =>
      insertUser(user).pipe(
        Effect.catchIf(
          (error) => isSqlError(error) && isUniqueViolation(error),
          () => Effect.fail(new EmailTaken({ email: user.email }))
        ),
        Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
      )

    /**
     * The account each repository and each user belongs to (D3): a repository's owner; a user's
     * organisation, or the user when they have none. One statement for any number of ids.
     */
    const findOwners = SqlSchema.findAll({
      Request: Schema.Struct({ repository_ids: Schema.Array(Schema.UUID), user_ids: Schema.Array(Schema.UUID) }),
      Result: Schema.Struct({
        owned: Schema.Literal("repository", "user"),
        id: Schema.String,
        account_kind: AccountKind,
        account_id: Schema.String
      }),
      execute: ({ repository_ids, user_ids }) =>
        sql`SELECT 'repository' AS owned, id, account_kind::text AS account_kind, account_id FROM repositories
            WHERE id = ANY(${repository_ids}::uuid[])
            UNION ALL
            SELECT 'user', u.id, CASE WHEN m.organisation_id IS NULL THEN 'user' ELSE 'client' END,
                   coalesce(m.organisation_id, u.id)
            FROM users u LEFT JOIN memberships m ON m.user_id = u.id
            WHERE u.id = ANY(${user_ids}::uuid[])`
    })

    return {
      findUserByEmail: orDefect(findUserByEmail),
      insertOrganisation: orDefect(insertOrganisation),
      organisationExists: orDefect(organisationExists),
      insertUser: insertUserOnce,
      insertMembership: orDefect(insertMembership),
      updatePasswordHash: orDefect(updatePasswordHash),
      updateOperator: orDefect(updateOperator),
      updateDisabled: orDefect(updateDisabled),
      listOrganisations: orDefect(listOrganisations),
      listUsers: orDefect(listUsers),
      listRepositories: orDefect(listRepositories),
      findAccounts: orDefect(findAccounts),
      insertRepository: orDefect(insertRepository),
      findOwners: orDefect(findOwners)
    } as const
  })
}) {}
