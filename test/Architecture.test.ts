import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

/**
 * The house rules of the layout (docs/architecture.md), each a check that
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

/** The contract: the whole (`src/Api.ts`), each feature's (`src/<Feature>/Api.ts`), and the middleware tags they name. */
const isContract = (file: string) => file === "src/Api.ts" || /^src\/[A-Za-z]+\/(Api|Middleware)\.ts$/.test(file)
const isFeatureContract = (file: string) => /^src\/[A-Za-z]+\/Api\.ts$/.test(file)
const isHandler = (file: string) =>
  file === "src/Http.ts" || /^src\/[A-Za-z]+\/Http\.ts$/.test(file) || file.startsWith("src/Http/") ||
  file.startsWith("src/Dashboard/")
/** A feature's SQL: `Repo.ts`, or any `*Repo.ts` of its folder when it keeps several (`Settlement/SessionsRepo.ts`). */
const isRepository = (file: string) => /^src\/[A-Za-z]+\/[A-Za-z]*Repo\.ts$/.test(file)
/**
 * An atomic change that several features' rules take part in, owned by one file (as a BullMQ
 * script owns a job's transition): `Settlement/Transition.ts`. It builds its own statements, so it
 * is judged as a repository, and its header lists every table it reads and writes.
 */
const isTransition = (file: string) => /^src\/[A-Za-z]+\/Transition\.ts$/.test(file)
/** A module that builds statements: a repository, a transition, or the SQL client's own module. */
const buildsStatements = (file: string) => isRepository(file) || isTransition(file) || file === "src/Sql.ts"
const isEntryPoint = (file: string) => ["src/main.ts", "src/cli.ts"].includes(file) || file.startsWith("workers/")
/** A module that holds a service: it declares an `Effect.Service` or a `Context.Tag` (the domain's `CurrentUser` is a fact, not a service). */
const isService = (file: string) =>
  !isRepository(file) && !isTransition(file) && !file.startsWith("src/Domain/") &&
  /extends (Effect\.Service<|Context\.Tag\()/.test(textOf(file))
/** A background loop: a layer that only runs (`Layer.scopedDiscard`), outside the handlers (whose own is the server's drain). */
const isLoop = (file: string) => !isHandler(file) && /\bLayer\.scopedDiscard\(/.test(textOf(file))
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

/** The migrations' text, in order: what the database holds is what they create. */
const MIGRATIONS = readdirSync(join(ROOT, "migrations")).filter((file) => /^\d{4}_.*\.ts$/.test(file)).sort().map((
  file
) => readFileSync(join(ROOT, "migrations", file), "utf8"))

/** Every table and view the migrations leave, with the tables a view reads. */
const schemaObjects = (): {
  readonly tables: ReadonlySet<string>
  readonly views: ReadonlyMap<string, Array<string>>
} => {
  const tables = new Set<string>()
  const views = new Map<string, Array<string>>()
  for (const migration of MIGRATIONS) {
    for (const [, name = ""] of migration.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)/g)) tables.add(name)
    for (const [, name = ""] of migration.matchAll(/DROP TABLE (?:IF EXISTS )?([a-z_]+)/g)) tables.delete(name)
    for (const [, from = "", to = ""] of migration.matchAll(/ALTER TABLE ([a-z_]+) RENAME TO ([a-z_]+)/g)) {
      if (tables.delete(from)) tables.add(to)
    }
    for (const [, name = "", body = ""] of migration.matchAll(/CREATE (?:OR REPLACE )?VIEW ([a-z_]+) AS([^`]*)/g)) {
      views.set(name, [...body.matchAll(/\b(?:FROM|JOIN)\s+([a-z_]+)/g)].map(([, table = ""]) => table))
    }
  }
  return { tables, views }
}

/** `[written, followed]` for each table a trigger function writes when rows of another are written. */
const triggerWrites = (): ReadonlyArray<readonly [string, string]> =>
  MIGRATIONS.flatMap((migration) =>
    [...migration.matchAll(/CREATE TRIGGER [a-z_]+ AFTER [A-Z]+ ON ([a-z_]+)[\s\S]*?EXECUTE FUNCTION ([a-z_]+)\(\)/g)]
      .flatMap(([, followed = "", fn = ""]) => {
        const body = migration.split(`CREATE FUNCTION ${fn}()`)[1]?.split(/CREATE (?:FUNCTION|TRIGGER)/)[0] ?? ""
        return [...body.matchAll(/\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_]+)/g)].map(([, table = ""]) =>
          [table, followed] as const
        )
      })
  )

/** What each repository file's SQL writes and reads, by table or view name. */
const sqlUse = (file: string, names: ReadonlySet<string>) => {
  const sqlText = textOf(file)
  const found = (pattern: RegExp) =>
    new Set([...sqlText.matchAll(pattern)].map(([, name = ""]) => name).filter((name) => names.has(name)))
  return {
    writes: found(/\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_]+)/g),
    reads: found(/\b(?:FROM|JOIN)\s+([a-z_]+)/g)
  }
}

/**
 * Who writes and who reads each table: its writers (features whose repositories insert, update
 * or delete its rows) and its foreign readers (features whose repositories read it without
 * writing it). A view is a read model of the feature that writes the tables it reads.
 */
const tableUse = () => {
  const { tables, views } = schemaObjects()
  const names = new Set([...tables, ...views.keys()])
  const writers = new Map([...tables].map((table) => [table, new Set<string>()]))
  const readers = new Map([...names].map((name) => [name, new Set<string>()]))
  for (const file of SOURCES.filter(isRepository)) {
    const feature = featureOf(file) ?? file
    const { reads, writes } = sqlUse(file, names)
    for (const table of writes) writers.get(table)?.add(feature)
    for (const name of reads) readers.get(name)?.add(feature)
  }
  // A transition writes the tables of several features by design (its header names them); the
  // tables only it writes are its own feature's, and what it reads is listed in its header.
  for (const file of SOURCES.filter(isTransition)) {
    for (const table of sqlUse(file, names).writes) {
      const owners = writers.get(table)
      if (owners !== undefined && owners.size === 0) owners.add(featureOf(file) ?? file)
    }
  }
  // A table a migration's trigger keeps (a counter of another table's rows) is written with the
  // rows it follows, in the same statement: it belongs to the feature that writes those rows.
  for (const [table, followed] of triggerWrites()) {
    const owners = writers.get(table)
    if (owners !== undefined && owners.size === 0) {
      for (const feature of writers.get(followed) ?? []) owners.add(feature)
    }
  }
  const ownerOf = (name: string): ReadonlyArray<string> =>
    views.has(name) ? [...new Set((views.get(name) ?? []).flatMap(ownerOf))] : [...(writers.get(name) ?? [])]
  const foreignReads = [...readers].flatMap(([name, features]) =>
    [...features].filter((feature) => !ownerOf(name).includes(feature)).map((feature) => ({
      feature,
      name,
      readModel: views.has(name)
    }))
  )
  return { tables, views, writers, foreignReads }
}

/**
 * Tables still read as rows by a feature that does not write them: each is to move behind its
 * writer's service or a read model it owns, as `settlement_sessions` did. The list may only shrink.
 */
const FOREIGN_TABLE_READS_LEFT = [
  "Auth reads memberships",
  "Auth reads users",
  "Books reads ledger_entries",
  "Books reads wallets",
  "Policies reads repositories",
  "Settlement reads wallets",
  "SpendControls reads wallets"
]

/** The figures the layout is judged by, as the closing notes quote them. */
const figures = () => {
  const sizes = SOURCES.map((file) => ({ file, lines: textOf(file).split("\n").length }))
    .sort((a, b) => b.lines - a.lines)
  const { foreignReads, writers } = tableUse()
  return {
    largestFile: sizes[0],
    writersPerTable: Object.fromEntries([...writers].sort().map(([table, features]) => [table, [...features].sort()])),
    foreignTableReads: foreignReads.filter((read) => !read.readModel).map((read) =>
      `${read.feature} reads ${read.name}`
    )
      .sort(),
    readModelReads: foreignReads.filter((read) => read.readModel).map((read) => `${read.feature} reads ${read.name}`)
      .sort(),
    domainImportsOutsideDomain:
      arrows((file) => file.startsWith("src/Domain/"), (target) => !target.startsWith("src/Domain/")).length
  }
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

  it("no feature's contract imports another's: what they share is the domain's, or the middleware tags'", () => {
    expect(SOURCES.filter(isFeatureContract).length).toBeGreaterThanOrEqual(5)
    expect(arrows(isFeatureContract, isFeatureContract)).toEqual([])
  })

  it("background loops are started by entry points: no handler imports one", () => {
    expect(SOURCES.filter(isLoop)).toEqual(expect.arrayContaining(["src/Events/Pruning.ts", "src/Webhooks/Relay.ts"]))
    expect(arrows(isHandler, isLoop)).toEqual([])
  })

  it("the domain imports only the domain (and libraries)", () => {
    expect(SOURCES.filter((file) => file.startsWith("src/Domain/") && importsOf(file).length > 0).length)
      .toBeGreaterThan(2)
    expect(arrows((file) => file.startsWith("src/Domain/"), (target) => !target.startsWith("src/Domain/"))).toEqual([])
  })

  it("SQL is written only in repositories, transitions and Sql.ts", () => {
    const writers = SOURCES.filter((file) => /\bsql(<[^>]*>)?`/.test(textOf(file)))
    expect(writers.filter((file) => !buildsStatements(file))).toEqual([])
  })

  it("no service passes SQL: only the modules that build statements name a statement or a fragment", () => {
    const namesStatements =
      /\bStatement\.(Fragment|Statement)\b|\btype Statement\b|\{[^}]*\bStatement\b[^}]*\} from "@effect\/sql"/
    expect(namesStatements.test("readonly write: Statement.Fragment | undefined")).toBe(true)
    expect(SOURCES.filter((file) => !buildsStatements(file) && namesStatements.test(textOf(file)))).toEqual([])
  })

  it("no feature imports another feature's repository or transition", () => {
    expect(
      arrows(() => true, (file) => isRepository(file) || isTransition(file)).filter((arrow) => {
        const [from = "", to = ""] = arrow.split(" -> ")
        return featureOf(from) !== featureOf(to)
      })
    ).toEqual([])
  })

  it("a transition's header lists every table it reads and writes", () => {
    const { tables, views } = schemaObjects()
    const names = new Set([...tables, ...views.keys()])
    const transitions = SOURCES.filter(isTransition)
    expect(transitions).toEqual(["src/Settlement/Transition.ts"])
    for (const file of transitions) {
      const header = textOf(file).match(/^\/\*\*([\s\S]*?)\*\//)?.[1] ?? ""
      const { reads, writes } = sqlUse(file, names)
      expect(writes.size).toBeGreaterThanOrEqual(8)
      expect([...reads, ...writes].filter((table) => !new RegExp(`\\b${table}\\b`).test(header))).toEqual([])
    }
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

  it("the workers' programs reach no HTTP module of ours and no HTTP framework (their metrics ports are bare node:http)", () => {
    for (const entry of ["workers/settlement.ts", "workers/webhooks.ts"]) {
      const loaded = [...reachableFrom(entry)]
      expect(loaded.length, entry).toBeGreaterThan(10)
      expect(loaded.filter((file) => isHandler(file) || isContract(file)), entry).toEqual([])
      const servers = loaded.flatMap(packagesOf).filter((name) =>
        /^@effect\/platform(-node)?\/(HttpApiBuilder|HttpRouter|HttpServer|NodeHttpServer|HttpMiddleware)/.test(name)
      )
      expect(servers, entry).toEqual([])
    }
  })

  it("each worker program runs what it is named for: settlement jobs, or the webhook relay and deliveries", () => {
    const runs = (entry: string, pattern: RegExp) => [...reachableFrom(entry)].filter((file) => pattern.test(file))
    expect(runs("workers/settlement.ts", /^src\/Settlement\/Worker\.ts$/)).toHaveLength(1)
    expect(runs("workers/settlement.ts", /^src\/Webhooks\/(Worker|Relay|Delivery)\.ts$/)).toEqual([])
    expect(runs("workers/webhooks.ts", /^src\/Webhooks\/(Worker|Relay|Delivery)\.ts$/)).toHaveLength(3)
    expect(runs("workers/webhooks.ts", /^src\/Settlement\/(Worker|Housekeeping)\.ts$/)).toEqual([])
  })

  it("outside Auth, \"session\" means a runner's settlement session, never a sign-in", () => {
    // Published names (the `session` field of `GET /auth/me`, the `SignInSession` schema) are
    // quoted strings and stay as they are; code and prose say "sign-in".
    const oldNames = /\b(SessionId|SessionsRepo|SessionCache|SignInSession|LiveSessionRow)\b|Domain\/Session\.js/
    const saysSessionForSignIn = { test: (source: string) => oldNames.test(source) || /sign-in session/i.test(source) }
    const withoutQuoted = (source: string) => source.replace(/"(?:[^"\\\n]|\\.)*"/g, "\"\"")
    expect(SOURCES.filter((file) => featureOf(file) === "Domain").length).toBeGreaterThan(3)
    expect(saysSessionForSignIn.test(withoutQuoted("const cache = yield* SessionCache // \"x\""))).toBe(true)
    expect(saysSessionForSignIn.test(withoutQuoted("Schema.Class<SignIn>(\"SignInSession\")"))).toBe(false)
    expect(
      SOURCES.filter((file) => featureOf(file) !== "Auth" && saysSessionForSignIn.test(withoutQuoted(textOf(file))))
    ).toEqual([])
  })

  it("nothing imports an entry point", () => {
    expect(arrows(() => true, isEntryPoint)).toEqual([])
  })
})

describe("one home per fact: each table has one writer", () => {
  it("finds the tables, views and repositories it judges", () => {
    const { tables, views } = schemaObjects()
    expect(tables.size).toBeGreaterThanOrEqual(10)
    expect([...tables]).toEqual(expect.arrayContaining(["wallets", "ledger_entries", "settlement_sessions"]))
    expect([...views.keys()]).toContain("settlement_session_balances")
    expect(SOURCES.filter(isRepository)).toEqual(
      expect.arrayContaining(["src/Settlement/Repo.ts", "src/Settlement/SessionsRepo.ts", "src/Wallets/Repo.ts"])
    )
    // Printed for the closing notes: largest file, writers per table, reads across features.
    console.log(JSON.stringify(figures(), null, 2))
  })

  it("every table is written by the repositories of exactly one feature", () => {
    const { writers } = tableUse()
    expect(
      [...writers].filter(([, features]) => features.size !== 1).map(([table, features]) =>
        `${table}: ${[...features].join(", ") || "no writer"}`
      )
    ).toEqual([])
  })

  it("a table is read elsewhere only through its writer's service or a read model it owns", () => {
    const { foreignReads } = tableUse()
    expect(foreignReads.filter((read) => !read.readModel).map((read) => `${read.feature} reads ${read.name}`).sort())
      .toEqual(FOREIGN_TABLE_READS_LEFT)
  })

  it("the settlement feature owns its tables: no other feature reads them as rows, but for the reads listed", () => {
    const { foreignReads } = tableUse()
    expect(
      foreignReads.filter((read) => read.name.startsWith("settlement_") && !read.readModel).map((read) =>
        `${read.feature} reads ${read.name}`
      ).sort()
    ).toEqual([])
    expect(
      SOURCES.filter((file) => /\bsettlement_sessions\b/.test(textOf(file))).filter((file) =>
        featureOf(file) !== "Settlement"
      )
    )
      .toEqual([])
  })
})
