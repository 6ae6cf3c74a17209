import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { execFile, spawnSync } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import path from "node:path"
import { Webhook } from "standardwebhooks"
import type { AccountEvent } from "../packages/client/src/index.js"
import { ROOT } from "../scripts/programs.mjs"
import { API_VERSION } from "../src/Api.js"
import { AppConfig } from "../src/Config.js"
import { jobIdOf, SETTLEMENT_JOB_OPTIONS } from "../src/Settlement/Jobs.js"
import { childEnvironment } from "./support/childEnvironment.js"
import {
  freePort,
  readyzAnswers,
  serviceEnvironment,
  settlementQueue,
  startService,
  waitFor
} from "./support/processes.js"
import { createUser, PASSWORD, TestApp } from "./support/TestApp.js"

/**
 * The client package as an integrator meets it: the package README's steps, run as written in an
 * empty folder outside the repository (the tarball packed from a fresh copy of the repository),
 * and every example the README lists run there against the service as `npm start` runs it.
 */

const PACKAGE = path.join(ROOT, "packages/client")
const EXAMPLES = path.join(ROOT, "examples")
const SERVER_PACKAGES = ["pg", "@node-rs/argon2", "@bull-board/api", "@effect/sql", "@effect/sql-pg", "jose", "hono"]
/** What only the settlement entry needs: the package's optional peers. */
const SETTLEMENT_PEERS = ["bullmq", "ioredis"]

/**
 * Runs a program to its end without blocking this process: the test's own services (its
 * database's listener, Redis) keep answering meanwhile.
 */
const run = (
  file: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly timeout: number }
) =>
  Effect.async<{ readonly status: number | null; readonly output: string; readonly stdout: string }>((resume) => {
    const child = execFile(file, args, {
      cwd: options.cwd,
      env: options.env ?? childEnvironment(),
      encoding: "utf8",
      timeout: options.timeout,
      maxBuffer: 16 * 1024 * 1024
    }, (error, stdout, stderr) => {
      const status = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resume(Effect.succeed({ status, output: `${stdout}\n${stderr}\n${error?.message ?? ""}`, stdout }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Runs one line of the README as a shell runs it. */
const shell = (
  line: string,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly timeout: number }
) => run("sh", ["-c", line], options)

/**
 * The lines of the package README's `sh` block introduced by `<!-- name -->`, as written (sh
 * ignores their comments); none when the README has no such block.
 */
const packageReadmeLines = (name: string): ReadonlyArray<string> => {
  const readme = readFileSync(path.join(PACKAGE, "README.md"), "utf8")
  const marker = `<!-- ${name} -->\n`
  const at = readme.indexOf(marker)
  if (at === -1) return []
  const block = /^```sh\n([\s\S]*?)```/.exec(readme.slice(at + marker.length))?.[1] ?? ""
  return block.split("\n").filter((line) => line.trim() !== "")
}

/**
 * The repository as a fresh clone of it holds it: its tracked files and those git does not ignore,
 * as the work tree has them, and nothing installed or built.
 */
const freshCopy = (into: string) => {
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    env: childEnvironment(),
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  expect(listed.status, listed.stderr).toBe(0)
  const files = listed.stdout.split("\0").filter((file) => file !== "" && existsSync(path.join(ROOT, file)))
  for (const file of files) {
    mkdirSync(path.dirname(path.join(into, file)), { recursive: true })
    copyFileSync(path.join(ROOT, file), path.join(into, file))
  }
  return files.length
}

/** The packages an install holds, by its lockfile: those on disk (not other platforms' optional ones). */
const installedPackages = (app: string): ReadonlyArray<string> => {
  const lock = JSON.parse(readFileSync(path.join(app, "package-lock.json"), "utf8")) as {
    packages: Record<string, unknown>
  }
  return Object.keys(lock.packages).filter((key) => key.startsWith("node_modules/") && existsSync(path.join(app, key)))
}

/**
 * The install's size as the README states it: whole MB (MiB) of files under node_modules, and the
 * packages besides the client itself.
 */
const installSize = (app: string) => ({
  megabytes: Math.round(sizeOf(path.join(app, "node_modules")) / 1024 / 1024),
  packages: installedPackages(app).filter((key) => key !== "node_modules/@account-api/client").length
})

/** The sizes the package README states, alone and with the settlement entry's peers. */
const statedSizes = () => {
  const readme = readFileSync(path.join(PACKAGE, "README.md"), "utf8").replace(/\s+/g, " ")
  const alone = /the package alone takes (\d+) MB in (\d+) packages/.exec(readme)
  const withPeers = /for the settlement entry, (\d+) MB in (\d+) packages/.exec(readme)
  return {
    alone: { megabytes: Number(alone?.[1]), packages: Number(alone?.[2]) },
    withPeers: { megabytes: Number(withPeers?.[1]), packages: Number(withPeers?.[2]) }
  }
}

/** Bytes under a directory, as `du` counts file sizes. */
const sizeOf = (dir: string): number =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).reduce((total, file) => {
    const stat = statSync(path.join(dir, file), { throwIfNoEntry: false })
    return total + (stat?.isFile() === true ? stat.size : 0)
  }, 0)

/** Whether something accepts TCP connections on the port, without sending it a request. */
const accepts = (port: number) =>
  Effect.async<Option.Option<true>>((resume) => {
    const socket = connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(Option.some(true)))
    })
    socket.once("error", () => resume(Effect.succeed(Option.none())))
  })

/** The README's code block introduced by `<!-- examples/<file> -->`. */
const readmeBlock = (file: string): string | undefined => {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8")
  const marker = `<!-- examples/${file} -->\n`
  const at = readme.indexOf(marker)
  if (at === -1) return undefined
  return /^```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(at + marker.length))?.[1]
}

describe("the client package's sources", () => {
  it("follows the API's version", () => {
    const pkg = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as { version: string }
    expect(pkg.version).toBe(API_VERSION)
  })

  it("depends on what its modules load at run time, pinned to the service's versions; BullMQ and ioredis are optional peers", () => {
    const root = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
      dependencies: Record<string, string>
      devDependencies: Record<string, string>
    }
    const pkg = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as {
      dependencies: Record<string, string>
      peerDependencies?: Record<string, string>
      peerDependenciesMeta?: Record<string, { optional?: boolean }>
    }
    expect(Object.keys(pkg.dependencies).sort()).toEqual([
      "@effect/platform",
      "decimal.js",
      "effect",
      "standardwebhooks"
    ])
    for (const [name, version] of Object.entries(pkg.dependencies)) {
      // The webhook verifier's package is the service's only to test its deliveries with.
      expect({ name, version }).toEqual({ name, version: root.dependencies[name] ?? root.devDependencies[name] })
    }
    // From the service's version on, within its major: what the integrator installs beside the package.
    expect(pkg.peerDependencies).toEqual(
      Object.fromEntries(SETTLEMENT_PEERS.map((name) => [name, `^${root.dependencies[name]}`]))
    )
    expect(pkg.peerDependenciesMeta).toEqual(
      Object.fromEntries(SETTLEMENT_PEERS.map((name) => [name, { optional: true }]))
    )
  })

  /** The files a module reaches through its relative imports, and the packages they import. */
  const importGraph = (entries: ReadonlyArray<string>) => {
    const seen = new Set<string>()
    const packages = new Set<string>()
    const visit = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      const text = readFileSync(path.join(ROOT, file), "utf8")
      for (const [, specifier = ""] of text.matchAll(/^(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)) {
        if (specifier.startsWith(".")) {
          visit(path.relative(ROOT, path.join(ROOT, path.dirname(file), specifier.replace(/\.js$/, ".ts"))))
        } else if (!specifier.startsWith("node:")) {
          packages.add(specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/"))
        }
      }
    }
    for (const entry of entries) visit(entry)
    return { files: [...seen], packages: [...packages].sort() }
  }

  it("its modules reach only the contract, the domain and the producer's core, and import only its dependencies and peers", () => {
    const { files, packages } = importGraph(
      readdirSync(path.join(PACKAGE, "src")).map((file) => `packages/client/src/${file}`)
    )
    const reached = files.filter((file) => !file.startsWith("packages/client/"))
    expect(reached).toEqual(
      expect.arrayContaining(["src/Api.ts", "src/Settlement/Jobs.ts", "src/Settlement/ProducerCore.ts"])
    )
    const contractOrDomain = (file: string) =>
      file === "src/Api.ts" || /^src\/[A-Za-z]+\/(Api|Middleware)\.ts$/.test(file) || file.startsWith("src/Domain/") ||
      [
        "src/OpenApi.ts",
        "src/Policies/Capabilities.ts",
        "src/Settlement/Jobs.ts",
        "src/Settlement/ProducerCore.ts",
        "src/Settlement/ProducerErrors.ts"
      ]
        .includes(file)
    expect(reached.filter((file) => !contractOrDomain(file))).toEqual([])
    const pkg = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as {
      dependencies: Record<string, string>
      peerDependencies?: Record<string, string>
    }
    expect(packages).toEqual([...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies ?? {})].sort())
  })

  it("only the settlement entry reaches BullMQ and ioredis", () => {
    const pkg = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as {
      exports: Record<string, string | { readonly import: string }>
    }
    const entries = Object.entries(pkg.exports).flatMap(([entry, target]) =>
      typeof target === "string" ? [] : [{
        entry,
        source: target.import.replace(/^\.\/dist\//, "").replace(/\.js$/, ".ts")
      }]
    )
    expect(entries.map(({ entry }) => entry).sort()).toEqual([".", "./effect", "./settlement", "./web"])
    const peersReached = entries.map(({ entry, source }) => ({
      entry,
      peers: importGraph([source]).packages.filter((name) => SETTLEMENT_PEERS.includes(name))
    }))
    expect(peersReached.sort((a, b) => a.entry.localeCompare(b.entry))).toEqual([
      { entry: ".", peers: [] },
      { entry: "./effect", peers: [] },
      { entry: "./settlement", peers: SETTLEMENT_PEERS },
      { entry: "./web", peers: [] }
    ])
  })

  it("the README's runner blocks are the example files", () => {
    for (const file of ["session-runner.ts", "session-runner-effect.ts", "plain-bullmq.mjs", "python_runner.py"]) {
      expect({ file, block: readmeBlock(file) }).toEqual({
        file,
        block: readFileSync(path.join(EXAMPLES, file), "utf8")
      })
    }
  })

  it.effect("the Python runner parses with Python's own parser", () =>
    Effect.gen(function*() {
      const parsed = yield* run("python3", [
        "-c",
        "import ast,sys; ast.parse(open(sys.argv[1]).read())",
        "python_runner.py"
      ], {
        cwd: EXAMPLES,
        timeout: 30_000
      })
      expect(parsed.status, parsed.output).toBe(0)
    }))
})

/**
 * The jobs the Python runner sends, read from its source: each `settle(name, {...})` call's
 * payload evaluated with the runner's variables bound, its OPTIONS, and the job id its own
 * `job_id_of` derives (the runner's functions run without its BullMQ, which is not installed here).
 */
const PYTHON_JOBS = `
import ast, base64, hashlib, json, sys
tree = ast.parse(open(sys.argv[1]).read())
names = {"account_id": sys.argv[2], "session_id": sys.argv[3]}
helpers = {}
functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in ("job_id_of", "differences")]
exec(compile(ast.Module(body=functions, type_ignores=[]), sys.argv[1], "exec"), {"base64": base64, "hashlib": hashlib}, helpers)
jobs = []
options = None
for node in ast.walk(tree):
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "OPTIONS" for t in node.targets):
        options = ast.literal_eval(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "settle":
        name = ast.literal_eval(node.args[0])
        data = eval(compile(ast.Expression(node.args[1]), "payload", "eval"), {}, names)
        job_id = helpers["job_id_of"](names["account_id"], data["idempotency_key"])
        jobs.append({"name": name, "data": data, "options": options, "jobId": job_id})
print(json.dumps(jobs))
`

/**
 * The Python runner's read-back check (its `differences`), on the job it sent found under its id,
 * another kind, and a squatter's reserve: what it answers for each.
 */
const PYTHON_READ_BACK = `
import ast, json, sys, types
tree = ast.parse(open(sys.argv[1]).read())
helpers = {}
functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "differences"]
exec(compile(ast.Module(body=functions, type_ignores=[]), sys.argv[1], "exec"), {}, helpers)
sent = {"account_id": "a-1", "session_id": "s-1", "amount_usd": "5", "idempotency_key": "s-1-reserve"}
squat = {"account_id": "a-2", "session_id": "squat", "amount_usd": "7", "idempotency_key": "squat-key"}
found = lambda name, data: types.SimpleNamespace(name=name, data=data)
print(json.dumps({
    "same": helpers["differences"]("reserve", sent, found("reserve", dict(reversed(list(sent.items()))))),
    "kind": helpers["differences"]("reserve", sent, found("spend", sent)),
    "squatter": helpers["differences"]("reserve", sent, found("reserve", squat)),
}))
`

describe("the Python runner's read-back", () => {
  it.effect("refuses a job found under its id that is not the one it sent, and takes the one it sent", () =>
    Effect.gen(function*() {
      const checked = yield* run("python3", ["-c", PYTHON_READ_BACK, "python_runner.py"], {
        cwd: EXAMPLES,
        timeout: 30_000
      })
      expect(checked.status, checked.output).toBe(0)
      expect(JSON.parse(checked.stdout)).toEqual({
        same: [],
        kind: ["kind"],
        squatter: ["account_id", "amount_usd", "idempotency_key", "session_id"]
      })
    }))
})

layer(TestApp(), { excludeTestServices: true, timeout: "600 seconds" })(
  "the package README's steps in an empty folder",
  (it) => {
    it.scoped(
      "pack from a fresh copy, install, type-check with TypeScript 7 and 5.9, and run every example against the service",
      () =>
        Effect.gen(function*() {
          const folder = yield* Effect.acquireRelease(
            Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-client-"))),
            (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
          )
          const install = packageReadmeLines("install")
          const runs = packageReadmeLines("run")
          expect(install.length).toBeGreaterThan(0)
          const repository = path.join(folder, "account-api")
          expect(freshCopy(repository)).toBeGreaterThan(100)
          const app = path.join(folder, "my-runner")
          mkdirSync(app)

          // The service, as `npm start` runs it, on this file's database and queue prefix; webhooks
          // may reach the warning example's receiver on 127.0.0.1 (development's setting).
          const config = yield* AppConfig
          const port = yield* freePort
          const prefix = config.redisPrefix
          const environment = serviceEnvironment(config, prefix, {
            PORT: String(port),
            WEBHOOK_ALLOW_INSECURE: "true"
          })
          const api = yield* startService("api", environment)
          const worker = yield* startService("worker", environment)
          yield* startService("webhooks", environment)
          yield* readyzAnswers(port, api)
          const baseUrl = `http://127.0.0.1:${port}`

          // The README's steps, one line after another as a shell runs them; npm answers from its
          // cache what it holds (the registry otherwise). Between them, what each install holds.
          const stepEnv = childEnvironment({
            ACCOUNT_API: repository,
            npm_config_prefer_offline: "true",
            npm_config_audit: "false",
            npm_config_fund: "false",
            npm_config_update_notifier: "false"
          })
          const sizes: { alone?: ReturnType<typeof installSize>; withPeers?: ReturnType<typeof installSize> } = {}
          for (const line of install) {
            const step = yield* shell(line, { cwd: app, env: stepEnv, timeout: 420_000 })
            expect(step.status, `${line}\n${step.output}`).toBe(0)
            if (line.includes("npm run pack:client")) {
              // It says where the tarball is: its path, alone on the last line.
              expect(step.stdout.trim().split("\n").at(-1)).toBe(
                path.join(repository, "packages/client/account-api-client-0.1.0.tgz")
              )
            }
            if (line.startsWith("npm install") && line.includes(".tgz")) {
              const installed = installedPackages(app)
              expect(installed).toContain("node_modules/@account-api/client")
              expect(installed.filter((key) =>
                [...SERVER_PACKAGES, ...SETTLEMENT_PEERS].some((name) => key === `node_modules/${name}`) ||
                key.startsWith("node_modules/@bull-board/")
              )).toEqual([])
              // Nothing of the service's configuration or storage came along with the contract.
              const shipped = readdirSync(path.join(app, "node_modules/@account-api/client/dist/src"), {
                recursive: true,
                encoding: "utf8"
              })
              expect(shipped.filter((file) =>
                /Config|Sql|Repo|Http\.|migrations/.test(file)
              )).toEqual([])
              sizes.alone = installSize(app)
              // The HTTP entries work with the package alone; the settlement entry asks for its peer.
              const entries = yield* run(process.execPath, [
                "--input-type=module",
                "-e",
                `import { AccountApiClient } from "@account-api/client"
                import * as web from "@account-api/client/web"
                import * as effect from "@account-api/client/effect"
                console.log(JSON.stringify(await new AccountApiClient({ baseUrl: process.argv[1] }).healthz()), typeof web.verifyWebhook, typeof effect.Api)
                await import("@account-api/client/settlement").catch((error) => console.log(error.code, error.message))`,
                baseUrl
              ], { cwd: app, timeout: 60_000 })
              expect(entries.status, entries.output).toBe(0)
              expect(entries.stdout).toContain(`{"status":"ok"} function function`)
              expect(entries.stdout).toContain("ERR_MODULE_NOT_FOUND Cannot find package 'bullmq'")
            }
            if (line.startsWith("npm install") && line.includes("bullmq")) sizes.withPeers = installSize(app)
          }
          console.log(
            `client install: alone ${JSON.stringify(sizes.alone)}, with the settlement peers ${
              JSON.stringify(sizes.withPeers)
            }`
          )
          // The README's figures, within what a patch release of a dependency moves.
          const stated = statedSizes()
          for (const [measured, claimed] of [[sizes.alone, stated.alone], [sizes.withPeers, stated.withPeers]]) {
            expect(Math.abs((measured?.megabytes ?? 0) - (claimed?.megabytes ?? 0))).toBeLessThanOrEqual(3)
            expect(Math.abs((measured?.packages ?? 0) - (claimed?.packages ?? 0))).toBeLessThanOrEqual(2)
          }

          // The steps' type-check ran the TypeScript npm installs today (7); the repository's 5.9 agrees.
          const installedTypeScript = JSON.parse(
            readFileSync(path.join(app, "node_modules/typescript/package.json"), "utf8")
          ) as { version: string }
          expect(Number(installedTypeScript.version.split(".")[0])).toBeGreaterThanOrEqual(7)
          const tsc59 = path.join(ROOT, "node_modules/.bin/tsc")
          const checked59 = yield* run(tsc59, ["--noEmit", "-p", "."], { cwd: app, timeout: 180_000 })
          expect(checked59.status, checked59.output).toBe(0)
          // The package's own types under a bare `tsc --init` (no Node types) with the library check on:
          // a file that imports each entry, checked by both.
          const bare = path.join(app, "entries")
          mkdirSync(bare)
          writeFileSync(
            path.join(bare, "entries.ts"),
            [
              `import { AccountApiClient, type AccountEvent } from "@account-api/client"`,
              `import { Api } from "@account-api/client/effect"`,
              `import { type RunSessionOptions, SessionRefused, SettlementClient, SettlementProducer, type SettlementResult, type SpendOptions } from "@account-api/client/settlement"`,
              `import { verifyWebhook } from "@account-api/client/web"`,
              `export const entries = [AccountApiClient, Api, SettlementClient, SettlementProducer, verifyWebhook]`,
              `export type Seen = [AccountEvent, SettlementResult]`,
              // Fleet controls (D19) as the declarations type them: labels, a model, what a refusal carries.
              `export const session: RunSessionOptions = { account_id: "a", session_id: "s", amount_usd: "1", labels: { team: "search" } }`,
              `export const spend: SpendOptions = { model: "model-a" }`,
              `export const refusal = (error: unknown): [string | undefined, number | undefined, string | null] | undefined =>`,
              `  error instanceof SessionRefused && error.limit !== undefined`,
              `    ? [error.max_reservable_usd, error.limit.open_sessions, error.limit.amount_usd] : undefined`,
              ""
            ].join("\n")
          )
          const init = yield* shell("npx tsc --init", { cwd: bare, env: stepEnv, timeout: 60_000 })
          expect(init.status, init.output).toBe(0)
          for (const tsc of [path.join(app, "node_modules/.bin/tsc"), tsc59]) {
            const bareCheck = yield* run(tsc, ["--noEmit", "-p", ".", "--skipLibCheck", "false"], {
              cwd: bare,
              timeout: 180_000
            })
            expect(bareCheck.status, `${tsc}\n${bareCheck.output}`).toBe(0)
          }

          // Every example the README lists, by the command it gives, with the settings its lines name.
          const command = (file: string) => {
            const line = runs.find((text) => text.split(/\s+/).includes(file))
            expect(line, `the README runs ${file}`).toBeDefined()
            return line ?? ""
          }
          expect(runs.length).toBe(11)
          const user = yield* createUser()
          const me = yield* Effect.promise(async () => {
            const login = await fetch(`${baseUrl}/auth/login`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ email: user.email, password: PASSWORD })
            })
            const { access_token } = await login.json() as { access_token: string }
            const answer = await fetch(`${baseUrl}/auth/me`, { headers: { authorization: `Bearer ${access_token}` } })
            return { ...await answer.json() as { account: { id: string } }, token: access_token }
          })
          const queue = yield* settlementQueue(config, prefix)
          yield* waitFor(
            "the worker takes jobs",
            Effect.promise(() => queue.getWorkers()).pipe(
              Effect.map((workers) => workers.length > 0 ? Option.some(true) : Option.none())
            ),
            { limit: "30 seconds", alive: [worker] }
          )
          const exampleEnv = childEnvironment({
            npm_config_prefer_offline: "true",
            npm_config_update_notifier: "false",
            ACCOUNT_API_URL: baseUrl,
            ACCOUNT_API_EMAIL: user.email,
            ACCOUNT_API_PASSWORD: PASSWORD,
            REDIS_URL: environment.REDIS_URL,
            SETTLEMENT_QUEUE_PREFIX: prefix,
            ACCOUNT_ID: me.account.id
          })
          const example = (file: string, env: Readonly<Record<string, string>> = {}) =>
            shell(command(file), { cwd: app, env: { ...exampleEnv, ...env }, timeout: 90_000 })

          const typed = yield* example("session-runner.ts")
          expect(typed.status, typed.output).toBe(0)
          expect(typed.stdout).toContain("reserve applied: reserved 5.000000")
          expect(typed.stdout).toContain("spend applied: spent 1.250000")
          expect(typed.stdout).toContain("session closed: spent 1.250000, holds 0.000000")

          const effect = yield* example("session-runner-effect.ts")
          expect(effect.status, effect.output).toBe(0)
          expect(effect.stdout).toContain("reserve applied: reserved 5.000000")
          expect(effect.stdout).toContain("release applied: reserved 0.000000")
          expect(effect.stdout).toContain("session closed: spent 1.250000")

          const session = "plain-session-1"
          const plain = yield* example("plain-bullmq.mjs", { SESSION_ID: session })
          expect(plain.status, plain.output).toBe(0)
          expect(plain.stdout).toContain("reserve applied: reserved 5.000000")
          expect(plain.stdout).toContain("spend applied: reserved 3.750000")
          expect(plain.stdout).toContain("release applied: reserved 0.000000")
          const sent = plain.stdout.split("\n").filter((line) => line.startsWith("send ")).map((line) =>
            JSON.parse(line.slice("send ".length)) as {
              options: unknown
              jobId: string
              data: { idempotency_key: string }
            }
          )
          expect(sent.map((job) => job.options)).toEqual(sent.map(() => SETTLEMENT_JOB_OPTIONS))
          // The typed producer's job ids: one derivation, whoever enqueues.
          expect(sent.map((job) => job.jobId)).toEqual(
            sent.map((job) => jobIdOf(me.account.id, job.data.idempotency_key))
          )

          // The Python runner sends exactly what the Node one sends, under the same ids.
          const python = yield* run("python3", ["-c", PYTHON_JOBS, "python_runner.py", me.account.id, session], {
            cwd: EXAMPLES,
            timeout: 30_000
          })
          expect(python.status, python.output).toBe(0)
          expect(sent.length).toBe(3)
          expect(JSON.parse(python.stdout)).toEqual(sent)

          // Events (D17): the poller pulls the log, then only what is new since its cursor.
          const authorized = { authorization: `Bearer ${me.token}`, "content-type": "application/json" }
          const setBudget = (budget_usd: string) =>
            Effect.promise(async () => {
              const wallet = await (await fetch(`${baseUrl}/developer/account/wallet`, { headers: authorized }))
                .json() as { version: number }
              const answer = await fetch(`${baseUrl}/developer/account/wallet`, {
                method: "PUT",
                headers: authorized,
                body: JSON.stringify({ budget_usd, idempotency_key: randomUUID(), expected_version: wallet.version })
              })
              return answer.status
            })
          const eventLog = Effect.promise(async () => {
            const answer = await fetch(`${baseUrl}/developer/account/events?limit=500`, { headers: authorized })
            return (await answer.json() as { events: Array<AccountEvent> }).events
          })
          const printed = (stdout: string) =>
            stdout.split("\n").filter((line) => line.startsWith("event ")).map((line) => line.split(" ")[1])
          expect(yield* setBudget("100")).toBe(200)
          expect(yield* setBudget("50")).toBe(200)
          const before = yield* eventLog
          const poll = example("events-poller.ts")
          const polled = yield* poll
          expect(polled.status, polled.output).toBe(0)
          expect(printed(polled.stdout)).toEqual(before.map((event) => event.id))
          expect(polled.stdout).toContain(`${before.length} new events`)
          expect(yield* setBudget("60")).toBe(200)
          const again = yield* poll
          expect(again.status, again.output).toBe(0)
          const after = yield* eventLog
          expect(after.length).toBeGreaterThan(before.length)
          expect(printed(again.stdout)).toEqual(after.slice(before.length).map((event) => event.id))

          // The stream resumes after the first event (what the log holds after it), then goes live.
          const streaming = yield* Effect.fork(
            example("events-stream.ts", { LAST_EVENT_ID: after[0]?.id ?? "", EVENTS_LIMIT: String(after.length) })
          )
          expect(yield* setBudget("70")).toBe(200)
          const streamed = yield* Fiber.join(streaming)
          expect(streamed.status, streamed.output).toBe(0)
          const streamedLog = yield* eventLog
          expect(printed(streamed.stdout)).toEqual(streamedLog.slice(1, after.length + 1).map((event) => event.id))

          // The receiver verifies deliveries signed as the service signs them (standardwebhooks' own sign).
          const secret = () => `whsec_${randomBytes(32).toString("base64")}`
          const [old, current] = [secret(), secret()]
          const deliver = (event: AccountEvent, secrets: ReadonlyArray<string>, tamper = false) => {
            const at = new Date()
            const body = JSON.stringify({ type: event.type, timestamp: event.created_at, data: event.data })
            return Effect.promise(() =>
              fetch(`http://127.0.0.1:${receiverPort}/`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  "webhook-id": event.id,
                  "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
                  "webhook-signature": secrets.map((key) => new Webhook(key).sign(event.id, at, body)).join(" ")
                },
                // One byte more than was signed, whatever the event: the signature covers every byte.
                body: tamper ? `${body} ` : body
              }).then((answer) => answer.status)
            )
          }
          const receiverPort = yield* freePort
          const receiving = yield* Effect.fork(example("webhook-receiver.ts", {
            PORT: String(receiverPort),
            WEBHOOK_SECRETS: `${current},${old}`,
            MAX_DELIVERIES: "4"
          }))
          yield* waitFor("the receiver listens", accepts(receiverPort), { limit: "30 seconds" })
          const [first, second] = streamedLog
          if (first === undefined || second === undefined) return yield* Effect.dieMessage("no events")
          expect(yield* deliver(first, [current])).toBe(204)
          // During a rotation: signed with both.
          expect(yield* deliver(second, [old, current])).toBe(204)
          // Delivered again (at least once): handled once.
          expect(yield* deliver(first, [old])).toBe(204)
          expect(yield* deliver(second, [current], true)).toBe(400)
          const received = yield* Fiber.join(receiving)
          expect(received.status, received.output).toBe(0)
          expect(received.stdout.split("\n").filter((line) => /^(verified|duplicate|refused)/.test(line))).toEqual([
            `verified ${first.id} ${first.type} at ${first.created_at}`,
            `verified ${second.id} ${second.type} at ${second.created_at}`,
            `duplicate ${first.id} ${first.type}`,
            "refused invalid_signature"
          ])

          // Fleet controls (D19), as an administrator of an account that has a limit of its own, which
          // the examples keep and put back.
          const admin = yield* createUser({ admin: true })
          const adminToken = yield* Effect.promise(async () => {
            const login = await fetch(`${baseUrl}/auth/login`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ email: admin.email, password: PASSWORD })
            })
            return (await login.json() as { access_token: string }).access_token
          })
          const asAdmin = (method: string, url: string, body?: unknown) =>
            Effect.promise(async () => {
              const answer = await fetch(`${baseUrl}${url}`, {
                method,
                headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
                ...(body === undefined ? {} : { body: JSON.stringify(body) })
              })
              return { status: answer.status, body: await answer.json() as Record<string, unknown> }
            })
          const ownLimit = { scope: "account", scope_id: null, period: "month", amount_usd: "1000.000000" }
          const seeded = yield* asAdmin("PUT", "/developer/account/limits", {
            expected_version: 0,
            limits: [{ scope: "account", period: "month", amount_usd: "1000" }]
          })
          expect(seeded.status, JSON.stringify(seeded.body)).toBe(200)
          const adminEnv = { ACCOUNT_API_EMAIL: admin.email }
          const limitsNow = Effect.map(asAdmin("GET", "/developer/account/limits"), (answer) => answer.body)

          // A fan-out of 5 under a concurrency limit of 3 on its label: 3 open and run, 2 are refused
          // with the limit as it stood (3 open of 3) and nothing that would have fit.
          const fanOut = yield* example("fan-out-limit.mjs", adminEnv)
          expect(fanOut.status, fanOut.output).toBe(0)
          const fanOutLabel = /^limit: label (fleet=fan-out-[0-9a-f]{8}), at most 3 sessions open at once$/m
            .exec(fanOut.stdout)?.[1]
          expect(fanOutLabel, fanOut.output).toBeDefined()
          const sessionLines = fanOut.stdout.split("\n").filter((line) => line.startsWith("session "))
          expect(sessionLines.filter((line) => / ran: spend applied$/.test(line)).length, fanOut.output).toBe(3)
          expect(
            sessionLines.filter((line) =>
              line.endsWith(
                `refused limit_reached by the label limit ${fanOutLabel}: 3 of 3 open, max_reservable_usd 0.000000`
              )
            ).length,
            fanOut.output
          ).toBe(2)
          expect(sessionLines.length).toBe(5)
          expect(fanOut.stdout).toContain("opened 3 of 5 sessions; 2 refused")
          // The account's own limit put back, and only it (two writes after the seed).
          expect(yield* limitsNow).toMatchObject({ version: 3, limits: [ownLimit] })

          // A warning by webhook: the third step of 2 takes the label's 10 a day to 6, past 50 %
          // (and short of 80 %); the receiver verifies it, and the account is left as it was.
          const warningPort = yield* freePort
          const warning = yield* example("warning-webhook.mjs", { ...adminEnv, PORT: String(warningPort) })
          expect(warning.status, warning.output).toBe(0)
          const warningLabel = /^limit: label (run=warning-[0-9a-f]{8}), 10 a day, warnings at 50 % and 80 %$/m
            .exec(warning.stdout)?.[1]
          expect(warningLabel, warning.output).toBeDefined()
          expect(warning.stdout.split("\n").filter((line) => /^(step|warning|refused)/.test(line))).toEqual([
            "step 1: spend applied",
            "step 2: spend applied",
            "step 3: spend applied",
            `warning limit.approaching: 50 % of the label limit ${warningLabel} (10.000000 a day), used 6.000000`
          ])
          expect(yield* limitsNow).toMatchObject({ version: 5, limits: [ownLimit] })
          expect(yield* asAdmin("GET", "/developer/account/webhooks")).toMatchObject({
            status: 200,
            body: { endpoints: [] }
          })
          // One warning written, at 50 %: once per limit, percentage and period (D19).
          const approaching = yield* asAdmin("GET", "/developer/account/events?type=limit.approaching")
          expect(approaching.body).toMatchObject({
            events: [{ type: "limit.approaching", data: { percent: 50, used_usd: "6.000000" } }]
          })

          // Stopped by another of the account's limits, one without a scope_id: the account's own
          // concurrency limit of 2 refuses before the run's label limit of 3 is reached, and the
          // example names the limit that did.
          const accountWide = yield* asAdmin("PUT", "/developer/account/limits", {
            expected_version: 5,
            limits: [
              { scope: "account", period: "month", amount_usd: "1000" },
              { scope: "account", period: "concurrent", max_open_sessions: 2 }
            ]
          })
          expect(accountWide.status, JSON.stringify(accountWide.body)).toBe(200)
          const stopped = yield* example("fan-out-limit.mjs", adminEnv)
          expect(stopped.status, stopped.output).toBe(0)
          const stoppedLines = stopped.stdout.split("\n").filter((line) => line.startsWith("session "))
          expect(stoppedLines.filter((line) => / ran: spend applied$/.test(line)).length, stopped.output).toBe(2)
          expect(
            stoppedLines.filter((line) =>
              line.endsWith("refused limit_reached by the account's limit: 2 of 2 open, max_reservable_usd 0.000000")
            ).length,
            stopped.output
          ).toBe(3)
          expect(stopped.stdout, stopped.output).not.toContain("null")

          // The stream as pasted ends by itself (after its seconds), so what follows it in a script runs.
          const bounded = yield* example("events-stream.ts", { EVENTS_SECONDS: "2" })
          expect(bounded.status, bounded.output).toBe(0)
          expect(bounded.stdout).toContain("0 events")

          // A trial grant (D21) that expires 5 s after it is made, while its session runs, in an account
          // of its own: the session's spends draw what its hold earmarked on the grant, before the expiry
          // and after it; the free part expires at expires_at, and what the release gives back then.
          const trialAdmin = yield* createUser({ admin: true })
          const trial = yield* example("trial-grant.ts", { ACCOUNT_API_EMAIL: trialAdmin.email, GRANT_SECONDS: "5" })
          expect(trial.status, trial.output).toBe(0)
          expect(trial.stdout).toMatch(/^grant [0-9a-f-]+: 5\.000000 promotional, priority 10, expires \S+Z$/m)
          expect(
            trial.stdout.split("\n").filter((line) =>
              /^(reserve|spend|grant expired|session|trial|entry|event)/.test(line)
            )
          )
            .toEqual([
              "reserve applied: holds 4.000000, 4.000000 of it on the trial grant",
              "spend applied before the expiry: 1.000000 from the trial grant",
              "grant expired: 1.000000 left the budget (now 4.000000); the session still holds 3.000000 of it",
              "spend applied after the expiry: 1.000000 from the trial grant",
              "session closed: spent 2.000000; the release gave 2.000000 back, which expired",
              "trial grant expired: drawn 2.000000, held 0.000000, free 0.000000, ended 3.000000 of 5.000000",
              "entry credit_added 5.000000: 5.000000 of the trial grant",
              "entry reserve 4.000000: 4.000000 of the trial grant",
              "entry spend 1.000000: 1.000000 of the trial grant",
              "entry credit_expired 1.000000: 1.000000 of the trial grant",
              "entry spend 1.000000: 1.000000 of the trial grant",
              "entry reserve_release 2.000000: 2.000000 of the trial grant",
              "entry credit_expired 2.000000: 2.000000 of the trial grant",
              "event grant.expired: credit_expired 1.000000"
            ])

          // Each developer's own daily limit (D22), in an account of its own: the administrator's own
          // limit replaces the each_user default for them; the largest reserve applies, a cent more not.
          const developer = yield* createUser({ admin: true })
          const each = yield* example("each-developer.ts", { ACCOUNT_API_EMAIL: developer.email })
          expect(each.status, each.output).toBe(0)
          expect(each.stdout.split("\n").filter((line) => /^(each user|applies|the largest|reserve)/.test(line)))
            .toEqual([
              `each user: 5 USD a day, resetting at midnight in UTC; ${developer.id} has 15.00 of their own`,
              "applies as user: 15.000000 a day, 15.000000 left",
              "the largest reserve now: 15.000000",
              "reserve of 15.01 refused limit_reached by the user limit",
              "reserve of 15.000000 applied"
            ])
          // A runner that asks first: nothing bounds a new account's session, so it reserves what it wants.
          const runner = yield* createUser()
          const applies = yield* example("what-applies.ts", { ACCOUNT_API_EMAIL: runner.email })
          expect(applies.status, applies.output).toBe(0)
          expect(applies.stdout).toContain("funds not enforced; the largest reserve unbounded; reserving 2.00")
          expect(applies.stdout).toContain("session ran: reserve applied, spend applied")
        }),
      // Its steps, each measured on this machine with room to spare: the fresh copy's install and the
      // pack (~60 s), four installs in the folder (~30 s), three type-checks (~60 s), the service's
      // start (~10 s), twelve examples (~5 s each; the trial grant's ~20 s, its expiry and the sweep's 15 s).
      600_000
    )
  }
)
