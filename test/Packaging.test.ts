import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { compiledPath, PROGRAMS, ROOT } from "../scripts/programs.mjs"
import { childEnvironment, runToEnd } from "./support/childEnvironment.js"

interface Locked {
  readonly version?: string
  readonly dev?: boolean
  readonly devOptional?: boolean
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
    // Node 20 is past its end of life; 22 and 24 are the tested lines (D11).
    expect(floor).toBeGreaterThanOrEqual(22)
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

  it("the programs' imports are production dependencies; the compiler and its types are development's", () => {
    const imported = ["src", "workers", "migrations"].flatMap((dir) => [...packagesImportedUnder(dir)])
    expect(imported.length).toBeGreaterThan(5)
    expect([...new Set(imported)].filter((name) => pkg.dependencies[name] === undefined)).toEqual([])
    // `npm start` installs every dependency (npm ci) and compiles; the image and `--omit=dev` run dist/.
    for (const tool of ["typescript", "esbuild", "@types/node"]) {
      expect({ tool, dev: pkg.devDependencies[tool] !== undefined, prod: pkg.dependencies[tool] !== undefined })
        .toEqual({ tool, dev: true, prod: false })
    }
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

/** What a file's JavaScript imports by name, static or dynamic, as the package it names. */
const packagesImportedBy = (source: string): ReadonlyArray<string> =>
  [
    ...source.matchAll(/^(?:import|export)\s[^;]*?from\s*"([^"]+)"|^import\s*"([^"]+)"|\bimport\(\s*"([^"]+)"\s*\)/gm)
  ]
    .map(([, from, bare, dynamic]) => from ?? bare ?? dynamic ?? "")
    .filter((specifier) => specifier !== "" && !specifier.startsWith(".") && !specifier.startsWith("node:"))

/** The `rm -rf node_modules/…` the Dockerfile's build stage runs after pruning to production dependencies. */
const removedByDockerfile = (): ReadonlyArray<string> =>
  readFileSync(path.join(ROOT, "Dockerfile"), "utf8")
    .replace(/\\\n/g, " ")
    .split("\n")
    .filter((line) => line.startsWith("RUN ") && line.includes("npm prune --omit=dev"))
    .flatMap((line) => [...line.matchAll(/\brm -rf ((?:node_modules\/\S+\s*)+)/g)])
    .flatMap(([, paths = ""]) => paths.trim().split(/\s+/))

describe("the programs' build (scripts/build.mjs)", () => {
  it("each program is one Latin-1 file, which V8 holds as one byte per character", () => {
    // One character above U+00FF (a `…` in a comment esbuild kept) doubles the source in the heap.
    const wide = Object.values(PROGRAMS).flatMap(({ source }) =>
      readFileSync(compiledPath(source), "utf8").split("\n").flatMap((line, index) =>
        /[\u0100-\u{10ffff}]/u.test(line) ? [`${source}, bundle line ${index + 1}: ${line.trim()}`] : []
      )
    )
    expect(wide).toEqual([])
  })
})

describe("a production install (npm ci --omit=dev, as the image's) (D11, D14)", () => {
  const install = mkdtempSync(path.join(tmpdir(), "account-api-prod-"))
  afterAll(() => rmSync(install, { recursive: true, force: true }))

  beforeAll(async () => {
    copyFileSync(path.join(ROOT, "package.json"), path.join(install, "package.json"))
    copyFileSync(path.join(ROOT, "package-lock.json"), path.join(install, "package-lock.json"))
    // From npm's cache when it holds the packages (the development install filled it), else the registry.
    const npm = await runToEnd(
      "npm",
      ["ci", "--omit=dev", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund"],
      { cwd: install, env: { NODE_ENV: "production" }, timeout: 280_000 }
    )
    expect(npm.status, npm.stderr).toBe(0)
    for (const removed of removedByDockerfile()) rmSync(path.join(install, removed), { recursive: true, force: true })
    cpSync(path.join(ROOT, "dist"), path.join(install, "dist"), { recursive: true })
  }, 300_000)

  it("holds no compiler, test runner, linter or TypeScript loader", () => {
    const present = [
      "typescript",
      "esbuild",
      "tsx",
      "vitest",
      "@effect/vitest",
      "eslint",
      "@types/node",
      "playwright-core"
    ]
      .filter((name) => existsSync(path.join(install, "node_modules", name)))
    expect(present).toEqual([])
    expect(
      readdirSync(path.join(install, "node_modules", ".bin")).filter((bin) => /^(tsc|tsx|vitest|eslint)$/.test(bin))
    )
      .toEqual([])
    // Sanity: it is an install, with what the programs need.
    expect(existsSync(path.join(install, "node_modules", "effect", "package.json"))).toBe(true)
  })

  it("npm keeps TypeScript there only as an optional peer, which the Dockerfile removes", () => {
    const entry = lock.packages["node_modules/typescript"]
    expect(entry?.dev === true || entry?.devOptional === true).toBe(true)
    expect(removedByDockerfile()).toContain("node_modules/typescript")
  })

  it("every package the compiled programs import resolves there, and the CLI runs from dist/", () => {
    const files = readdirSync(path.join(install, "dist"), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".js"))
    const specifiers = [
      ...new Set(files.flatMap((file) => packagesImportedBy(readFileSync(path.join(install, "dist", file), "utf8"))))
    ]
    // Effect's packages are bundled into the programs; the others are imported (scripts/build.mjs).
    expect(specifiers).toContain("bullmq")
    expect(specifiers.filter((specifier) => /^(effect|@effect\/)/.test(specifier))).toEqual([])
    // Resolved as the programs resolve them: by Node's ESM resolver, from inside the install.
    const resolver = path.join(install, "resolve.mjs")
    writeFileSync(
      resolver,
      "for (const s of process.argv.slice(2)) { try { import.meta.resolve(s) } catch { console.log(s) } }\n"
    )
    const unresolved = spawnSync(process.execPath, [resolver, ...specifiers], {
      cwd: install,
      encoding: "utf8",
      env: childEnvironment()
    })
    expect(unresolved.status, unresolved.stderr).toBe(0)
    expect(unresolved.stdout.split("\n").filter((line) => line !== "")).toEqual([])
    const cli = spawnSync(process.execPath, ["dist/src/cli.js", "--help"], {
      cwd: install,
      encoding: "utf8",
      env: childEnvironment()
    })
    expect(cli.status, cli.stderr).toBe(0)
    expect(cli.stdout).toContain("migrate")
  })
})
