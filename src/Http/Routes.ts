import * as HttpApi from "@effect/platform/HttpApi"
import { Api } from "../Api.js"
import { CONSOLE_PATHS } from "../Console/Http.js"
import { DOCUMENT_PATHS } from "./Docs.js"

/** `/developer/account/repositories/:repository_id/policy` as a pattern matching any one segment in the parameter's place. */
const patternOf = (path: string) =>
  new RegExp(
    `^${
      path.split("/").map((part) => part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(
        "/"
      )
    }/?$`
  )

const routes: ReadonlyArray<{ readonly method: string; readonly pattern: RegExp }> = (() => {
  const found: Array<{ method: string; pattern: RegExp }> = [...DOCUMENT_PATHS, ...CONSOLE_PATHS].map((path) => ({
    method: "GET",
    pattern: patternOf(path)
  }))
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      found.push({ method: endpoint.method, pattern: patternOf(endpoint.path) })
    }
  })
  return found
})()

/**
 * The methods a path has, from the contract itself (D15: a known path with a
 * method it does not have is 405 with `Allow`); none for an unknown path.
 */
export const allowedMethods = (path: string): ReadonlyArray<string> => {
  const methods = new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))
  if (methods.has("GET")) methods.add("HEAD")
  return [...methods].sort()
}
