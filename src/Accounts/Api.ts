import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { MAX_QUERY_LENGTH, MemberNotFound, MemberPage, RepositoryPage } from "../Domain/Directory.js"
import { Limit } from "../Domain/Paging.js"
import { RepositoryNotFound } from "../Domain/Policy.js"
import { problem } from "../Domain/Problem.js"

/** A directory read's query (D23): a name's substring, and pages as the event pull's (`after`, `limit`). */
const DirectoryQuery = (what: string) =>
  Schema.Struct({
    q: Schema.optionalWith(
      Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_QUERY_LENGTH)).annotations({
        description:
          `Only ${what} whose name holds this text, case-insensitively (1 to ${MAX_QUERY_LENGTH} characters).`,
        message: () => ({ message: `must be 1 to ${MAX_QUERY_LENGTH} characters`, override: true })
      }),
      { exact: true }
    ),
    after: Schema.optionalWith(
      Schema.String.annotations({
        description: `Returns the ${what} after this one, by name then id; pass the previous page's next_after.`
      }),
      { exact: true }
    ),
    limit: Limit(what)
  })

export const RepositoriesQuery = DirectoryQuery("repositories")
export const MembersQuery = DirectoryQuery("members")

/**
 * The account's directory (D23): its repositories and its members by name, so that clients
 * show names where every other answer carries ids. Any member may read it.
 */
export class DirectoryApi extends HttpApiGroup.make("directory")
  .add(
    HttpApiEndpoint.get("listRepositories", "/developer/account/repositories")
      .annotate(OpenApi.Summary, "Repositories")
      .setUrlParams(RepositoriesQuery)
      .addSuccess(RepositoryPage)
      .addError(problem(RepositoryNotFound))
      .annotate(
        OpenApi.Description,
        "The account's repositories by name then id, each with whether it has a policy override. " +
          "Pass next_after as after for the next page (404 repository_not_found for an after that is not one of them)."
      )
  )
  .add(
    HttpApiEndpoint.get("listMembers", "/developer/account/members")
      .annotate(OpenApi.Summary, "Members")
      .setUrlParams(MembersQuery)
      .addSuccess(MemberPage)
      .addError(problem(MemberNotFound))
      .annotate(
        OpenApi.Description,
        "The account's people by name then id (a personal account: its one user); email only in an " +
          "administrator's read. Pass next_after as after for the next page (404 member_not_found for an after " +
          "that is not one of them)."
      )
  )
  .middleware(Authentication)
{}
