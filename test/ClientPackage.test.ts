import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { execFile } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import {
  copyFileSync,
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
import { SETTLEMENT_JOB_OPTIONS } from "../src/Settlement/Jobs.js"
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
 * The client package as an integrator meets it: packed, installed from the tarball into an empty
 * folder outside the repository, its TypeScript examples type-checked there with `strict`, and
 * every runnable example run against the service as `npm start` runs it.
 */

const PACKAGE = path.join(ROOT, "packages/client")
const EXAMPLES = path.join(ROOT, "examples")
const SERVER_PACKAGES = ["pg", "@node-rs/argon2", "@bull-board/api", "@effect/sql", "@effect/sql-pg", "jose", "hono"]

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
      env: options.env ?? process.env,
      encoding: "utf8",
      timeout: options.timeout,
      maxBuffer: 16 * 1024 * 1024
    }, (error, stdout, stderr) => {
      const status = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resume(Effect.succeed({ status, output: `${stdout}\n${stderr}\n${error?.message ?? ""}`, stdout }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

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

  it("depends on what its modules load at run time, pinned to the service's versions", () => {
    const root = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
      dependencies: Record<string, string>
      devDependencies: Record<string, string>
    }
    const pkg = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as {
      dependencies: Record<string, string>
    }
    expect(Object.keys(pkg.dependencies).sort()).toEqual([
      "@effect/platform",
      "bullmq",
      "decimal.js",
      "effect",
      "ioredis",
      "standardwebhooks"
    ])
    for (const [name, version] of Object.entries(pkg.dependencies)) {
      // The webhook verifier's package is the service's only to test its deliveries with.
      expect({ name, version }).toEqual({ name, version: root.dependencies[name] ?? root.devDependencies[name] })
    }
  })

  it("its modules reach only the contract, the domain and the producer's core, and import only its dependencies", () => {
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
    for (const file of readdirSync(path.join(PACKAGE, "src"))) visit(`packages/client/src/${file}`)
    const reached = [...seen].filter((file) => !file.startsWith("packages/client/"))
    expect(reached).toEqual(
      expect.arrayContaining(["src/Api.ts", "src/Settlement/Jobs.ts", "src/Settlement/ProducerCore.ts"])
    )
    const contractOrDomain = (file: string) =>
      file === "src/Api.ts" || /^src\/[A-Za-z]+\/Api\.ts$/.test(file) || file.startsWith("src/Domain/") ||
      ["src/OpenApi.ts", "src/Policies/Capabilities.ts", "src/Settlement/Jobs.ts", "src/Settlement/ProducerCore.ts"]
        .includes(file)
    expect(reached.filter((file) => !contractOrDomain(file))).toEqual([])
    const pkg = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as {
      dependencies: Record<string, string>
    }
    expect([...packages].sort()).toEqual(Object.keys(pkg.dependencies).sort())
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
 * payload evaluated with the runner's variables bound, and its OPTIONS.
 */
const PYTHON_JOBS = `
import ast, json, sys
tree = ast.parse(open(sys.argv[1]).read())
names = {"account_id": sys.argv[2], "session_id": sys.argv[3]}
jobs = []
options = None
for node in ast.walk(tree):
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "OPTIONS" for t in node.targets):
        options = ast.literal_eval(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "settle":
        name = ast.literal_eval(node.args[0])
        data = eval(compile(ast.Expression(node.args[1]), "payload", "eval"), {}, names)
        jobs.append({"name": name, "data": data, "options": options})
print(json.dumps(jobs))
`

layer(TestApp(), { excludeTestServices: true, timeout: "360 seconds" })(
  "the packed client in an empty folder",
  (it) => {
    it.scoped(
      "installs without the server, type-checks strictly, and its examples run a session against the service",
      () =>
        Effect.gen(function*() {
          const folder = yield* Effect.acquireRelease(
            Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-client-"))),
            (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
          )
          // Pack (its prepack builds dist/ from the repository's sources), then install the tarball alone.
          const packed = yield* run("npm", ["pack", "--pack-destination", folder], { cwd: PACKAGE, timeout: 120_000 })
          expect(packed.status, packed.output).toBe(0)
          const tarball = readdirSync(folder).find((file) => file.endsWith(".tgz"))
          expect(tarball).toBeDefined()
          const app = path.join(folder, "app")
          mkdirSync(app)
          writeFileSync(
            path.join(app, "package.json"),
            JSON.stringify({ name: "integrator", private: true, type: "module" })
          )
          const installed = yield* run(
            "npm",
            ["install", path.join(folder, tarball ?? ""), "--no-audit", "--no-fund", "--prefer-offline"],
            { cwd: app, timeout: 180_000 }
          )
          expect(installed.status, installed.output).toBe(0)

          const lock = JSON.parse(readFileSync(path.join(app, "package-lock.json"), "utf8")) as {
            packages: Record<string, unknown>
          }
          const dependencies = Object.keys(lock.packages).filter((key) => key.startsWith("node_modules/"))
          expect(dependencies).toContain("node_modules/@account-api/client")
          expect(
            dependencies.filter((key) =>
              SERVER_PACKAGES.some((name) =>
                key === `node_modules/${name}` || key.startsWith("node_modules/@bull-board/")
              )
            )
          ).toEqual([])
          // Nothing of the service's configuration or storage came along with the contract.
          const shipped = readdirSync(path.join(app, "node_modules/@account-api/client/dist/src"), {
            recursive: true,
            encoding: "utf8"
          })
          expect(shipped.filter((file) => /Config|Sql|Repo|Http\.|migrations/.test(file))).toEqual([])
          console.log(
            `client install: ${dependencies.length - 1} dependencies besides the package, ` +
              `${(sizeOf(path.join(app, "node_modules")) / 1024 / 1024).toFixed(1)} MiB in node_modules, ` +
              `tarball ${(statSync(path.join(folder, tarball ?? "")).size / 1024).toFixed(0)} KiB`
          )

          // Type-check (and compile) the TypeScript examples with strict, as an integrator's project would.
          const typescript = [
            "session-runner.ts",
            "session-runner-effect.ts",
            "events-poller.ts",
            "events-stream.ts",
            "webhook-receiver.ts"
          ]
          for (const file of [...typescript, "plain-bullmq.mjs"]) {
            copyFileSync(path.join(EXAMPLES, file), path.join(app, file))
          }
          writeFileSync(
            path.join(app, "tsconfig.json"),
            JSON.stringify({
              compilerOptions: {
                target: "ES2022",
                module: "NodeNext",
                moduleResolution: "NodeNext",
                strict: true,
                skipLibCheck: false,
                outDir: "build",
                types: ["node"],
                typeRoots: [path.join(ROOT, "node_modules/@types")]
              },
              files: typescript
            })
          )
          const checked = yield* run(path.join(ROOT, "node_modules/.bin/tsc"), ["-p", "tsconfig.json"], {
            cwd: app,
            timeout: 180_000
          })
          expect(checked.status, checked.output).toBe(0)

          // The service, as `npm start` runs it, on this file's database and queue prefix.
          const config = yield* AppConfig
          const port = yield* freePort
          const prefix = config.redisPrefix
          const environment = serviceEnvironment(config, prefix, { PORT: String(port) })
          const api = yield* startService("api", environment)
          const worker = yield* startService("worker", environment)
          yield* readyzAnswers(port, api)
          const user = yield* createUser()
          const baseUrl = `http://127.0.0.1:${port}`
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
          const exampleEnv = {
            PATH: process.env.PATH ?? "",
            HOME: process.env.HOME ?? "",
            ACCOUNT_API_URL: baseUrl,
            ACCOUNT_API_EMAIL: user.email,
            ACCOUNT_API_PASSWORD: PASSWORD,
            REDIS_URL: environment.REDIS_URL,
            SETTLEMENT_QUEUE_PREFIX: prefix,
            ACCOUNT_ID: me.account.id
          }

          const typed = yield* run("node", ["build/session-runner.js"], { cwd: app, env: exampleEnv, timeout: 60_000 })
          expect(typed.status, typed.output).toBe(0)
          expect(typed.stdout).toContain("reserve applied: reserved 5.000000")
          expect(typed.stdout).toContain("spend applied: spent 1.250000")
          expect(typed.stdout).toContain("session closed: spent 1.250000, holds 0.000000")

          const effect = yield* run("node", ["build/session-runner-effect.js"], {
            cwd: app,
            env: exampleEnv,
            timeout: 60_000
          })
          expect(effect.status, effect.output).toBe(0)
          expect(effect.stdout).toContain("reserve applied: reserved 5.000000")
          expect(effect.stdout).toContain("release applied: reserved 0.000000")
          expect(effect.stdout).toContain("session closed: spent 1.250000")

          const session = "plain-session-1"
          const plain = yield* run("node", ["plain-bullmq.mjs"], {
            cwd: app,
            env: { ...exampleEnv, SESSION_ID: session },
            timeout: 60_000
          })
          expect(plain.status, plain.output).toBe(0)
          expect(plain.stdout).toContain("reserve applied: reserved 5.000000")
          expect(plain.stdout).toContain("spend applied: reserved 3.750000")
          expect(plain.stdout).toContain("release applied: reserved 0.000000")
          const sent = plain.stdout.split("\n").filter((line) => line.startsWith("send ")).map((line) =>
            JSON.parse(line.slice("send ".length)) as unknown
          )
          expect(sent.map((job) => (job as { options: unknown }).options)).toEqual(
            sent.map(() => SETTLEMENT_JOB_OPTIONS)
          )

          // The Python runner sends exactly what the Node one sends.
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
          const poll = run("node", ["build/events-poller.js"], { cwd: app, env: exampleEnv, timeout: 60_000 })
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
          const streaming = yield* Effect.fork(run("node", ["build/events-stream.js"], {
            cwd: app,
            env: { ...exampleEnv, LAST_EVENT_ID: after[0]?.id ?? "", EVENTS_LIMIT: String(after.length) },
            timeout: 60_000
          }))
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
          const receiving = yield* Effect.fork(run("node", ["build/webhook-receiver.js"], {
            cwd: app,
            env: {
              ...exampleEnv,
              PORT: String(receiverPort),
              WEBHOOK_SECRETS: `${current},${old}`,
              MAX_DELIVERIES: "4"
            },
            timeout: 60_000
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
        }),
      // Its steps, each measured on this machine with room to spare: pack with its build (~15 s), one
      // install (~10 s), the strict type-check (~25 s), the service's start (~10 s), seven examples (~5 s each).
      300_000
    )
  }
)
