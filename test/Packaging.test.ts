import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"

interface Locked {
  readonly version?: string
  readonly dev?: boolean
  readonly peerDependencies?: Record<string, string>
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>
  readonly optional?: boolean
  readonly optionalDependencies?: Record<string, string>
  readonly engines?: { readonly node?: string }
}

const lock = JSON.parse(readFileSync(path.join(ROOT, "package-lock.json"), "utf8")) as {
  packages: Record<string, Locked>
}
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  engines: { node: string }
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}

/** The packages a directory's TypeScript imports by name (`effect`, `@effect/sql`), not relative paths or Node's own. */
const packagesImportedUnder = (dir: string): ReadonlySet<string> =>
  new Set(
    readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts"))
      .flatMap((
        file
      ) => [
        ...readFileSync(path.join(ROOT, dir, file), "utf8").matchAll(/^(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)
      ])
      .map(([, specifier = ""]) => specifier)
      .filter((specifier) => !specifier.startsWith(".") && !specifier.startsWith("node:"))
      .map((specifier) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/"))
  )

describe("a clean install (D11)", () => {
  it("the lockfile records every platform's optional packages, so a plain npm ci accepts it", () => {
    const missing: Array<string> = []
    for (const [location, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        // npm looks a dependency up beside the package, then in each enclosing node_modules.
        const candidates = [`${location}/node_modules/${name}`, `node_modules/${name}`]
        if (!candidates.some((candidate) => candidate in lock.packages)) missing.push(`${location} -> ${name}`)
      }
    }
    expect(missing).toEqual([])
  })

  it("no installed package needs a newer Node than package.json's engines allows", () => {
    const floor = Number(/^>=\s*(\d+)/.exec(pkg.engines.node)?.[1])
    expect(floor).toBeGreaterThanOrEqual(20)
    const needsNewer = Object.entries(lock.packages).flatMap(([location, entry]) => {
      const wanted = entry.engines?.node ?? ""
      // Only ">=N" floors above ours; ranges that list an older major ("^20.19.0 || >=22") accept it.
      const onlyFloor = /^>=\s*(\d+)(?:\.\d+)*\s*$/.exec(wanted)
      return !entry.optional && onlyFloor !== null && Number(onlyFloor[1]) > floor
        ? [`${location} wants node ${wanted}`]
        : []
    })
    expect(needsNewer).toEqual([])
  })

  it("an install without dev dependencies builds and runs the programs: what they import, the compiler and its types", () => {
    const imported = ["src", "workers", "migrations"].flatMap((dir) => [...packagesImportedUnder(dir)])
    expect(imported.length).toBeGreaterThan(5)
    // `npm start` compiles src/ with tsc (scripts/programs.mjs), whose tsconfig names Node's types.
    const needed = [...new Set([...imported, "typescript", "@types/node"])]
    expect(needed.filter((name) => pkg.dependencies[name] === undefined)).toEqual([])
  })

  it("tools only development uses are dev dependencies: the bench's tsx, the linters, the test runner", () => {
    for (const tool of ["tsx", "eslint", "vitest", "@effect/vitest", "@effect/language-service"]) {
      expect({ tool, dev: pkg.devDependencies[tool] !== undefined, prod: pkg.dependencies[tool] !== undefined })
        .toEqual({ tool, dev: true, prod: false })
    }
  })

  it("every peer the Effect packages need is listed, pinned to the version installed (all or none)", () => {
    const unlisted = Object.entries(lock.packages)
      .filter(([location, entry]) => location.startsWith("node_modules/@effect/") && entry.dev !== true)
      .flatMap(([location, entry]) =>
        Object.keys(entry.peerDependencies ?? {})
          .filter((peer) => entry.peerDependenciesMeta?.[peer]?.optional !== true)
          .filter((peer) => pkg.dependencies[peer] !== lock.packages[`node_modules/${peer}`]?.version)
          .map((peer) => `${location.slice("node_modules/".length)} needs ${peer}`)
      )
    expect(unlisted).toEqual([])
  })
})
