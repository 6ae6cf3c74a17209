import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))

const sourcesUnder = (dir: string): ReadonlyArray<string> =>
  readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(dir, file))

describe("imports of the running programs", () => {
  // An index loads every module of its package: @effect/platform's holds the Scalar and Swagger
  // documentation pages, ~20 MB of strings on the heap of each process (Swagger is served at
  // /docs and imported by its own module), and @effect/platform-node's loads an HTTP client,
  // WebSockets and the cluster runtime.
  it("take @effect/platform and @effect/platform-node module by module, never their index", () => {
    const offenders = ["src", "workers", "migrations"].flatMap(sourcesUnder).filter((file) =>
      /from "@effect\/platform(-node)?"/.test(readFileSync(join(ROOT, file), "utf8"))
    )
    expect(offenders).toEqual([])
  })
})
