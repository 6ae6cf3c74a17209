import type pg from "pg"
import type { Caller } from "./auth.js"

/** What a handler gets once the caller is authenticated. */
export interface RouteContext {
  readonly caller: Caller
  readonly pool: pg.Pool
  readonly query: Readonly<Record<string, string | undefined>>
  readonly body: unknown
}

/**
 * The endpoints the baseline answers, one entry per endpoint a suite compares.
 * Each does the same work as the service's handler after authentication: the
 * same SQL, the same JSON (answered 200). To compare another endpoint, add it here.
 */
export interface Route {
  readonly method: "GET" | "POST" | "PUT"
  readonly url: string
  readonly handle: (context: RouteContext) => Promise<unknown>
}

export const routes: ReadonlyArray<Route> = [
  {
    method: "GET",
    url: "/auth/me",
    handle: async ({ caller }) => ({ user: caller.user, account: caller.account, session: caller.session })
  }
]
