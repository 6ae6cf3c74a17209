import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"

interface Locked {
  readonly optional?: boolean
  readonly optionalDependencies?: Record<string, string>
  readonly engines?: { readonly node?: string }
}

const lock = JSON.parse(readFileSync(path.join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, Locked> }
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }

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
      return !entry.optional && onlyFloor !== null && Number(onlyFloor[1]) > floor ? [`${location} wants node ${wanted}`] : []
    })
    expect(needsNewer).toEqual([])
  })
})
