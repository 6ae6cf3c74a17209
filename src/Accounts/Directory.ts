import { DateTime, Effect, Option } from "effect"
import { type Account, accountKey, isUuid } from "../Domain/Account.js"
import {
  DirectoryMember,
  DirectoryRepository,
  MemberNotFound,
  MemberPage,
  RepositoryPage
} from "../Domain/Directory.js"
import { RepositoryNotFound } from "../Domain/Policy.js"
import { Policies } from "../Policies.js"
import { DirectoryRepo } from "./DirectoryRepo.js"

export interface DirectoryQuery {
  readonly q: string | null
  readonly after: Option.Option<string>
  readonly limit: number
}

/** The rows read and whether more follow: a page reads one row past its size. */
const pageOf = <A extends { readonly id: string }>(rows: ReadonlyArray<A>, limit: number) => {
  const page = rows.slice(0, limit)
  return { page, next_after: rows.length > limit ? page[page.length - 1]?.id ?? null : null }
}

/**
 * The account's directory (D23): repositories and members by name then id, for clients to
 * resolve the ids the rest of the API carries. Any member may read it; a member's email is in an
 * administrator's read only. An `after` that is not one of the account's rows is 404, as an
 * unknown event is to the pull (D17): a page never starts somewhere the caller cannot name.
 */
export class Directory extends Effect.Service<Directory>()("Accounts/Directory", {
  effect: Effect.gen(function*() {
    const repo = yield* DirectoryRepo
    const policies = yield* Policies

    const cursorOf = <E>(
      find: (
        request: { readonly account_kind: "client" | "user"; readonly account_id: string; readonly id: string }
      ) => Effect.Effect<Option.Option<{ readonly name: string; readonly id: string }>>,
      account: Account,
      after: Option.Option<string>,
      notFound: () => E
    ) =>
      Option.match(after, {
        onNone: () => Effect.succeed(null),
        onSome: (id) =>
          !isUuid(id)
            ? Effect.fail(notFound())
            : Effect.flatMap(
              find({ ...accountKey(account), id }),
              (found) => Option.match(found, { onNone: () => Effect.fail(notFound()), onSome: Effect.succeed })
            )
      })

    const listRepositories = Effect.fn("Directory.listRepositories")(
      function*(account: Account, query: DirectoryQuery) {
        const after = yield* cursorOf(
          repo.repositoryCursor,
          account,
          query.after,
          () => new RepositoryNotFound({ detail: "after is not one of the account's repositories." })
        )
        const rows = yield* repo.repositories({ ...accountKey(account), q: query.q, after, rows: query.limit + 1 })
        const { next_after, page } = pageOf(rows, query.limit)
        const overridden = yield* policies.overriddenRepositories(page.map((row) => row.id))
        return new RepositoryPage({
          repositories: page.map((row) =>
            new DirectoryRepository({
              id: row.id,
              name: row.name,
              has_policy_override: overridden.has(row.id),
              created_at: DateTime.unsafeFromDate(row.created_at)
            })
          ),
          next_after
        })
      }
    )

    const listMembers = Effect.fn("Directory.listMembers")(
      function*(account: Account, query: DirectoryQuery, withEmail: boolean) {
        const after = yield* cursorOf(
          repo.memberCursor,
          account,
          query.after,
          () => new MemberNotFound({ detail: "after is not one of the account's members." })
        )
        const rows = yield* repo.members({ ...accountKey(account), q: query.q, after, rows: query.limit + 1 })
        const { next_after, page } = pageOf(rows, query.limit)
        return new MemberPage({
          members: page.map(({ email, ...member }) => new DirectoryMember(withEmail ? { ...member, email } : member)),
          next_after
        })
      }
    )

    return { listRepositories, listMembers } as const
  }),
  dependencies: [DirectoryRepo.Default, Policies.Default]
}) {}
