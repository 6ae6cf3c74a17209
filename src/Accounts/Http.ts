import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { DEFAULT_PAGE_SIZE } from "../Domain/Paging.js"
import { Directory } from "./Directory.js"

/** The account's directory's handlers (D23). */
export const DirectoryHttpLive = HttpApiBuilder.group(Api, "directory", (handlers) =>
  Effect.gen(function*() {
    const directory = yield* Directory
    const queryOf = (urlParams: { readonly q?: string; readonly after?: string; readonly limit?: number }) => ({
      q: urlParams.q ?? null,
      after: Option.fromNullable(urlParams.after),
      limit: urlParams.limit ?? DEFAULT_PAGE_SIZE
    })
    return handlers
      .handle("listRepositories", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          directory.listRepositories(account, queryOf(urlParams))))
      .handle("listMembers", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account, user }) =>
          directory.listMembers(account, queryOf(urlParams), user.is_admin)))
  })).pipe(Layer.provide(AuthenticationLive), Layer.provide([Auth.Default, Directory.Default]))
