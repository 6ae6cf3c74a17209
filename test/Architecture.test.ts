import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

/**
 * The house rules of the layout (the README's "Layout"), each a check that
 * fails naming the file that breaks it. Arrows run contract -> domain <-
 * service <- handler; repositories hold the SQL; Config reads the environment.
 */

const ROOT = fileURLToPath(new URL("..", import.meta.url))

const sourcesUnder = (dir: string): ReadonlyArray<string> =>
  readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(dir, file))

const SOURCES = [...sourcesUnder("src"), ...sourcesUnder("workers")]
const text = new Map(SOURCES.map((file) => [file, readFileSync(join(ROOT, file), "utf8")]))
const textOf = (file: string) => text.get(file) ?? ""

/** The repository files a module imports, resolved: `./Auth/Api.js` from `src/Auth.ts` is `src/Auth/Api.ts`. */
const importsOf = (file: string): ReadonlyArray<string> =>
  [...textOf(file).matchAll(/^(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)"/gms)].flatMap(([, specifier]) => {
    const target = relative(ROOT, join(ROOT, dirname(file), (specifier ?? "").replace(/\.js$/, ".ts")))
    return existsSync(join(ROOT, target)) ? [target] : []
  })

/** The packages a module imports. */
const packagesOf = (file: string): ReadonlyArray<string> =>
  [...textOf(file).matchAll(/^(?:import|export)\s[^;]*?from\s+"([^".][^"]*)"/gms)].map(([, name]) => name ?? "")

const isContract = (file: string) => file === "src/Api.ts" || /^src\/[A-Za-z]+\/Api\.ts$/.test(file)
const isHandler = (file: string) =>
  file === "src/Http.ts" || /^src\/[A-Za-z]+\/Http\.ts$/.test(file) || file.startsWith("src/Http/") ||
  file.startsWith("src/Dashboard/")
const isRepository = (file: string) => /^src\/[A-Za-z]+\/Repo\.ts$/.test(file)
const isEntryPoint = (file: string) => ["src/main.ts", "src/cli.ts"].includes(file) || file.startsWith("workers/")
/** A module that holds a service: it declares an `Effect.Service` or a `Context.Tag` (the domain's `CurrentUser` is a fact, not a service). */
const isService = (file: string) =>
  !isRepository(file) && !file.startsWith("src/Domain/") &&
  /extends (Effect\.Service<|Context\.Tag\()/.test(textOf(file))
/** Everything that decides or does, and is not HTTP: services and their pure helpers, the domain, repositories. */
const isCore = (file: string) => !isContract(file) && !isHandler(file) && !isEntryPoint(file)

/** `src/Wallets/Repo.ts` belongs to `Wallets`, as do `src/Wallets.ts` and `src/Wallets/*`. */
const featureOf = (file: string) => file.match(/^src\/([A-Za-z]+)(?:\.ts$|\/)/)?.[1]

/** `file -> imported` for every import of a module matching `from` that matches `to`. */
const arrows = (from: (file: string) => boolean, to: (file: string) => boolean) =>
  SOURCES.filter(from).flatMap((file) => importsOf(file).filter(to).map((target) => `${file} -> ${target}`))

/** Every module a program loads from the repository, following imports from its entry point. */
const reachableFrom = (entry: string): ReadonlySet<string> => {
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    importsOf(file).forEach(visit)
  }
  visit(entry)
  return seen
}

describe("the layout's rules", () => {
  it("finds the modules it judges (a rule over nothing would pass for nothing)", () => {
    expect(SOURCES.filter(isContract).length).toBeGreaterThanOrEqual(5)
    expect(SOURCES.filter(isHandler).length).toBeGreaterThanOrEqual(5)
    expect(SOURCES.filter(isRepository).length).toBeGreaterThanOrEqual(5)
    expect(SOURCES.filter(isService)).toEqual(
      expect.arrayContaining(["src/Accounts.ts", "src/Auth.ts", "src/Wallets.ts"])
    )
    expect(importsOf("src/Auth.ts").length).toBeGreaterThan(3)
  })

  it("no service, repository or domain module imports a contract or a handler", () => {
    expect(arrows(isCore, (target) => isContract(target) || isHandler(target))).toEqual([])
  })

  it("no contract imports a service, a repository or a handler", () => {
    expect(arrows(isContract, (target) => isService(target) || isRepository(target) || isHandler(target))).toEqual([])
  })

  it("SQL is written only in repositories and in Sql.ts", () => {
    const writers = SOURCES.filter((file) => /\bsql(<[^>]*>)?`/.test(textOf(file)))
    expect(writers.filter((file) => !isRepository(file) && file !== "src/Sql.ts")).toEqual([])
  })

  it("no feature imports another feature's repository", () => {
    expect(
      arrows(() => true, isRepository).filter((arrow) => {
        const [from = "", to = ""] = arrow.split(" -> ")
        return featureOf(from) !== featureOf(to)
      })
    ).toEqual([])
  })

  it("no two features import each other", () => {
    const features = new Set(SOURCES.filter(isCore).flatMap((file) => featureOf(file) ?? []))
    features.delete("Domain")
    const uses = new Map([...features].map((feature) => [
      feature,
      new Set(
        SOURCES.filter((file) => isCore(file) && featureOf(file) === feature)
          .flatMap(importsOf)
          .flatMap((target) => featureOf(target) ?? [])
          .filter((other) => other !== feature && features.has(other))
      )
    ]))
    const loops = [...uses].flatMap(([feature, used]) =>
      [...used].filter((other) => feature < other && (uses.get(other)?.has(feature) ?? false)).map((other) =>
        `${feature} <-> ${other}`
      )
    )
    expect(loops).toEqual([])
  })

  it("the environment is read only in Config.ts", () => {
    const readers = SOURCES.filter((file) =>
      /process\.env|\bConfig\.(string|integer|number|boolean|redacted|port|option|literal|duration)\(/.test(
        textOf(file)
      )
    )
    expect(readers.filter((file) => file !== "src/Config.ts")).toEqual([])
  })

  it("the worker's program reaches no HTTP module of ours and no HTTP server", () => {
    const loaded = [...reachableFrom("workers/settlement.ts")]
    expect(loaded.length).toBeGreaterThan(10)
    expect(loaded.filter((file) => isHandler(file) || isContract(file))).toEqual([])
    const servers = loaded.flatMap(packagesOf).filter((name) =>
      /^@effect\/platform(-node)?\/(HttpApiBuilder|HttpRouter|HttpServer|NodeHttpServer|HttpMiddleware)/.test(name)
    )
    expect(servers).toEqual([])
  })

  it("nothing imports an entry point", () => {
    expect(arrows(() => true, isEntryPoint)).toEqual([])
  })
})
