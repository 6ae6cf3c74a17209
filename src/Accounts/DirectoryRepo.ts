import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AccountKind } from "../Domain/Account.js"
import { orDefect } from "../Sql/Errors.js"

const Owner = Schema.Struct({ account_kind: AccountKind, account_id: Schema.String })

/** Where a page starts: after the row of this name and id (the order is name, then id). */
const Cursor = Schema.Struct({ name: Schema.String, id: Schema.String })

const PageRequest = Schema.Struct({
  ...Owner.fields,
  /** A substring of the name, matched case-insensitively; null for every row. */
  q: Schema.NullOr(Schema.String),
  after: Schema.NullOr(Cursor),
  /** Rows to read: the page's size and one more, to tell whether another page follows. */
  rows: Schema.Number
})

const RepositoryRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  created_at: Schema.DateFromSelf
})

const MemberRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  is_admin: Schema.Boolean,
  disabled: Schema.Boolean,
  email: Schema.String
})

/**
 * The account's directory (D23): its repositories and members by name then id, a page at a
 * time. Reads only; the rows are written by the operators' commands (AccountsRepo). A member of
 * an organisation is a user with its membership; a personal account's one member is its user.
 */
export class DirectoryRepo extends Effect.Service<DirectoryRepo>()("Accounts/DirectoryRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const nameHolds = (q: string | null) => q === null ? sql`TRUE` : sql`strpos(lower(x.name), lower(${q})) > 0`
    const afterCursor = (after: typeof Cursor.Type | null) =>
      after === null ? sql`TRUE` : sql`(x.name, x.id) > (${after.name}, ${after.id}::uuid)`

    const repositoryCursor = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, id: Schema.String }),
      Result: Cursor,
      execute: ({ account_id, account_kind, id }) =>
        sql`SELECT name, id FROM repositories
            WHERE id = ${id}::uuid AND account_kind = ${account_kind} AND account_id = ${account_id}::uuid`
    })

    const repositories = SqlSchema.findAll({
      Request: PageRequest,
      Result: RepositoryRow,
      execute: ({ account_id, account_kind, after, q, rows }) =>
        sql`SELECT x.id, x.name, x.created_at
            FROM repositories x
            WHERE x.account_kind = ${account_kind} AND x.account_id = ${account_id}::uuid
              AND ${nameHolds(q)} AND ${afterCursor(after)}
            ORDER BY x.name, x.id
            LIMIT ${rows}`
    })

    /** The account's users: an organisation's members, or a personal account's own user. */
    const membersOf = ({ account_id, account_kind }: typeof Owner.Type) =>
      account_kind === "client"
        ? sql`SELECT u.* FROM users u JOIN memberships m ON m.user_id = u.id
              WHERE m.organisation_id = ${account_id}::uuid`
        : sql`SELECT u.* FROM users u
              WHERE u.id = ${account_id}::uuid
                AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id)`

    const memberCursor = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, id: Schema.String }),
      Result: Cursor,
      execute: ({ id, ...owner }) => sql`SELECT x.name, x.id FROM (${membersOf(owner)}) x WHERE x.id = ${id}::uuid`
    })

    const members = SqlSchema.findAll({
      Request: PageRequest,
      Result: MemberRow,
      execute: ({ after, q, rows, ...owner }) =>
        sql`SELECT x.id, x.name, x.is_admin, x.disabled_at IS NOT NULL AS disabled, x.email
            FROM (${membersOf({ account_kind: owner.account_kind, account_id: owner.account_id })}) x
            WHERE ${nameHolds(q)} AND ${afterCursor(after)}
            ORDER BY x.name, x.id
            LIMIT ${rows}`
    })

    return {
      repositoryCursor: orDefect(repositoryCursor),
      repositories: orDefect(repositories),
      memberCursor: orDefect(memberCursor),
      members: orDefect(members)
    } as const
  })
}) {}
