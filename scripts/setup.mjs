// One entry point behind `npm start|test|cli|bench` (D11): install dependencies, compile the
// programs, find or start PostgreSQL and Redis, create the database, run the command. Only Node
// built-ins (and programs.mjs, which imports only those) are imported statically, since pg and
// ioredis exist only after step 1. Everything this script (and npm) prints goes to stderr, so
// that `npm run --silent cli` leaves stdout to the CLI's JSON.
import { spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { ensureBuilt, programCommand, PROGRAMS, ROOT } from "./programs.mjs"
import { nodeHome, runWithNode, TESTED_NODE } from "./with-node.mjs"

const DATA_DIR = path.join(ROOT, ".data")
const DEFAULT_DATABASE_URL = "postgres://localhost:5432/account_api"
const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"
const PRIVATE_POSTGRES_PORT = 54329
const PRIVATE_REDIS_PORT = 63799
// initdb and postgres refuse to run as root, so root runs them as the `postgres` OS user.
const AS_ROOT = process.getuid?.() === 0

class SetupError extends Error {}

/** `npm run --silent …` (npm's log level silent): set-up says only what went wrong, as npm does. */
const SILENT = process.env.npm_config_loglevel === "silent"
/** What set-up is doing, for a person watching: left out of a silent run. */
const log = (message) => SILENT || process.stderr.write(`[setup] ${message}\n`)
/** What went wrong, or what set-up did instead: always said. */
const warn = (message) => process.stderr.write(`[setup] ${message}\n`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const osUser = () => process.env.PGUSER ?? os.userInfo().username
const localBin = (name) => path.join(ROOT, "node_modules", ".bin", name)
const redact = (url) => url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@")
const pathDirs = () => (process.env.PATH ?? "").split(path.delimiter).filter(Boolean)

/** Runs a helper to completion, its stdout sent to our stderr; throws when it fails. */
function runQuietly(command, args) {
  const result = spawnSync(command, args, { cwd: ROOT, stdio: ["ignore", 2, 2] })
  if (result.status !== 0) {
    const why = result.error?.message ?? `exit ${result.status ?? result.signal}`
    throw new SetupError(`\`${command} ${args.join(" ")}\` failed (${why})`)
  }
}

// ---- 1. Dependencies ---------------------------------------------------------------------

/** The fields of a package.json that decide what `npm ci` installs (a new script does not). */
const INSTALL_FIELDS = [
  "dependencies",
  "devDependencies",
  "optionalDependencies",
  "peerDependencies",
  "overrides",
  "workspaces",
  "engines"
]

function dependencyHash() {
  const hash = createHash("sha256")
  for (const file of ["package.json", "packages/client/package.json"]) {
    const manifest = path.join(ROOT, file)
    if (!existsSync(manifest)) continue
    const fields = JSON.parse(readFileSync(manifest, "utf8"))
    hash.update(JSON.stringify(INSTALL_FIELDS.map((field) => fields[field] ?? null)))
  }
  const lock = path.join(ROOT, "package-lock.json")
  if (existsSync(lock)) hash.update(readFileSync(lock))
  return hash.digest("hex")
}

export function ensureDependencies() {
  const stamp = path.join(ROOT, "node_modules", ".setup-stamp")
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === dependencyHash()) return
  if (!existsSync(path.join(ROOT, "package-lock.json"))) {
    log("installing dependencies (npm install)")
    runQuietly("npm", ["install", "--include=dev"])
  } else {
    // Dev dependencies too, even under NODE_ENV=production: TypeScript compiles the programs.
    log("installing dependencies (npm ci --include=dev)")
    // npm's own output is kept for when it fails; it says nothing a successful install needs.
    const output = path.join(DATA_DIR, "npm-ci.log")
    mkdirSync(DATA_DIR, { recursive: true })
    const result = spawnSync("npm", ["ci", "--include=dev"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      encoding: "utf8"
    })
    writeFileSync(output, `${result.stdout ?? ""}${result.stderr ?? ""}`)
    if (result.status !== 0) {
      // The lockfile records every platform's optional packages, so npm ci should not fail; a
      // registry that serves only some of them can make it, and npm install still follows the lock.
      warn(`npm ci failed (its output is in ${path.relative(ROOT, output)}); retrying with \`npm install --no-save\``)
      runQuietly("npm", ["install", "--no-save", "--include=dev"])
    }
  }
  writeFileSync(stamp, dependencyHash()) // hashed after installing: `npm install` may write the lockfile
}

// ---- 2. PostgreSQL -----------------------------------------------------------------------

/** A URL without a user means the OS user (as in libpq); spelled out for children without $USER. */
function withUser(url) {
  const parsed = new URL(url)
  if (parsed.username) return url
  parsed.username = osUser()
  return parsed.href
}

/** Runs `use` with a client on the server's `postgres` database: ours may not exist yet. */
async function withMaintenanceClient(url, use) {
  const { default: pg } = await import("pg")
  const maintenance = new URL(url)
  maintenance.pathname = "/postgres"
  const client = new pg.Client({ connectionString: maintenance.href, connectionTimeoutMillis: 3000 })
  try {
    await client.connect()
    return await use(client)
  } finally {
    await client.end().catch(() => {})
  }
}

const pingPostgres = (url) =>
  withMaintenanceClient(url, (client) => client.query({ text: "SELECT 1", query_timeout: 3000 }))

/** The newest directory holding initdb, pg_ctl and postgres: PATH first, then Debian's layout. */
export function findPostgresBinDir() {
  const versions = existsSync("/usr/lib/postgresql") ? readdirSync("/usr/lib/postgresql") : []
  versions.sort((a, b) => b.localeCompare(a, "en", { numeric: true }))
  return [...pathDirs(), ...versions.map((version) => `/usr/lib/postgresql/${version}/bin`)]
    .find((dir) => ["initdb", "pg_ctl", "postgres"].every((tool) => existsSync(path.join(dir, tool))))
}

/**
 * Starts, or reuses when already running, a private cluster in `dataDir/postgres` listening on
 * 127.0.0.1:port. Returns the URL of `database` on it, and `stop` when this call started it.
 */
export function startPrivatePostgres(binDir, dataDir, port, database) {
  const cluster = path.join(dataDir, "postgres")
  const role = AS_ROOT ? "postgres" : osUser()
  const pgTool = (tool, args) =>
    AS_ROOT ? ["runuser", ["-u", "postgres", "--", path.join(binDir, tool), ...args]] : [path.join(binDir, tool), args]

  mkdirSync(dataDir, { recursive: true })
  mkdirSync(cluster, { recursive: true, mode: 0o700 })
  // The server user writes the cluster, and its log and socket beside it in dataDir.
  if (AS_ROOT) runQuietly("chown", ["postgres:", dataDir, cluster])
  if (!existsSync(path.join(cluster, "PG_VERSION"))) {
    log(`initialising a private PostgreSQL cluster in ${cluster}`)
    runQuietly(...pgTool("initdb", ["-D", cluster, "--auth=trust", "-U", role]))
  }
  const server = { url: `postgres://${role}@127.0.0.1:${port}/${database}`, stop: null }
  if (spawnSync(...pgTool("pg_ctl", ["status", "-D", cluster]), { stdio: "ignore" }).status === 0) {
    log(`reusing the private PostgreSQL already running from ${cluster}`)
    return server
  }
  log(`starting a private PostgreSQL on 127.0.0.1:${port}`)
  // pg_ctl passes -o through a shell, hence the quotes around the socket directory.
  const options = `-p ${port} -k '${dataDir}' -c listen_addresses=127.0.0.1`
  runQuietly(
    ...pgTool("pg_ctl", ["-D", cluster, "-l", path.join(dataDir, "postgres.log"), "-o", options, "-w", "start"])
  )
  server.stop = () => runQuietly(...pgTool("pg_ctl", ["-D", cluster, "stop", "-m", "fast"]))
  return server
}

// ---- 3. Redis ----------------------------------------------------------------------------

async function pingRedis(url) {
  const { default: Redis } = await import("ioredis")
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000
  })
  let cause // connect() itself only says "Connection is closed."
  client.on("error", (error) => (cause ??= error))
  let timer
  const timeout = new Promise((
    _,
    reject
  ) => (timer = setTimeout(() => reject(new Error("no answer within 2 s")), 2000)))
  try {
    await Promise.race([client.connect().then(() => client.ping()), timeout])
  } catch (error) {
    throw cause ?? error
  } finally {
    clearTimeout(timer)
    client.disconnect()
  }
}

const redisAnswers = (url) => pingRedis(url).then(() => true, () => false)

/** The directory on PATH holding redis-server (and, as every Redis package has, redis-cli). */
const findRedisBinDir = () => pathDirs().find((dir) => existsSync(path.join(dir, "redis-server")))

/**
 * Starts, or reuses when already running, a private Redis on 127.0.0.1:port. It holds the
 * settlement queue, so it keeps an append-only file and never evicts (D14; BullMQ's requirement).
 */
export async function startPrivateRedis(binDir, dataDir, port) {
  const server = { url: `redis://127.0.0.1:${port}`, stop: null }
  if (await redisAnswers(server.url)) {
    log(`reusing the private Redis already running on ${server.url}`)
    return server
  }
  log(`starting a private Redis on 127.0.0.1:${port}`)
  mkdirSync(path.join(dataDir, "redis"), { recursive: true })
  runQuietly(path.join(binDir, "redis-server"), [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    path.join(dataDir, "redis"),
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
    "--maxmemory-policy",
    "noeviction",
    "--daemonize",
    "yes",
    "--pidfile",
    path.join(dataDir, "redis.pid"),
    "--logfile",
    path.join(dataDir, "redis.log")
  ])
  // --daemonize returns before the server listens (or fails to), so wait for it to answer.
  for (let attempt = 1; !(await redisAnswers(server.url)); attempt++) {
    if (attempt === 20) throw new SetupError(`the private Redis did not start; see ${path.join(dataDir, "redis.log")}`)
    await sleep(250)
  }
  server.stop = () => runQuietly(path.join(binDir, "redis-cli"), ["-p", String(port), "shutdown", "nosave"])
  return server
}

// ---- 2 and 3. The servers that answer, else private ones ---------------------------------

const SERVERS = {
  postgres: {
    kind: "PostgreSQL",
    envVar: "DATABASE_URL",
    target: () => withUser(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL),
    ping: pingPostgres,
    findBinDir: findPostgresBinDir,
    startPrivate: (binDir) => startPrivatePostgres(binDir, DATA_DIR, PRIVATE_POSTGRES_PORT, "account_api"),
    missing: "no PostgreSQL server binaries (initdb, pg_ctl, postgres) are on PATH or in /usr/lib/postgresql/*/bin.\n" +
      "Install PostgreSQL (Debian/Ubuntu: `apt-get install postgresql`; macOS: `brew install postgresql`)"
  },
  redis: {
    kind: "Redis",
    envVar: "REDIS_URL",
    target: () => process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
    ping: pingRedis,
    findBinDir: findRedisBinDir,
    startPrivate: (binDir) => startPrivateRedis(binDir, DATA_DIR, PRIVATE_REDIS_PORT),
    missing:
      "no redis-server is on PATH.\nInstall Redis (Debian/Ubuntu: `apt-get install redis-server`; macOS: `brew install redis`)"
  }
}

/**
 * The server at the target URL when it answers. Otherwise, unless its variable named it, a private
 * one started from local binaries; `owned` collects the stops of the servers this run started.
 */
async function resolveServer({ kind, envVar, target, ping, findBinDir, startPrivate, missing }, owned) {
  const url = target()
  try {
    await ping(url)
    return url
  } catch (error) {
    const problem = `${kind} at ${redact(url)} does not answer (${error.message})`
    if (process.env[envVar]) {
      throw new SetupError(`${problem}. Start that server, or unset ${envVar} to use a local one.`)
    }
    const binDir = findBinDir()
    if (!binDir) throw new SetupError(`${problem}, and ${missing}, or run \`docker compose up -d\`, or set ${envVar}.`)
    log(`${problem}; using a private one from ${binDir}`)
    const server = await startPrivate(binDir)
    if (server.stop) owned.push(server.stop)
    return server.url
  }
}

// ---- 4. Database -------------------------------------------------------------------------

export function ensureDatabase(url) {
  const name = decodeURIComponent(new URL(url).pathname.slice(1))
  return withMaintenanceClient(url, async (client) => {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])
    if (rowCount > 0) return
    log(`creating database ${name}`)
    await client.query(`CREATE DATABASE "${name.replaceAll("\"", "\"\"")}"`).catch((error) => {
      // A concurrent run created it first: duplicate_database, or, when both got past the
      // catalog check at once, a unique violation on pg_database's name index.
      if (error.code !== "42P04" && error.code !== "23505") throw error
    })
  })
}

// ---- 5. Run ------------------------------------------------------------------------------

/**
 * The service's programs run compiled, as scripts/programs.mjs says. The bench, a development
 * tool, runs from TypeScript with tsx as a loader in Node itself, not under the `tsx` command:
 * that command relays a signal to its program and SIGKILLs it within ~60 ms if it has not
 * exited, which would cut the bench's clean-up short.
 */
const COMMANDS = {
  start: () => [
    programCommand("api"),
    ...(["worker", "webhooks"].filter((name) => existsSync(path.join(ROOT, PROGRAMS[name].source)))
      .map((name) => programCommand(name)))
  ],
  test: (args) => [[localBin("vitest"), ["run", ...args]]],
  cli: (args) => [programCommand("cli", { args })],
  bench: (args) => [[process.execPath, ["--import", "tsx", "bench/run.ts", ...args]]]
}

/** SIGKILLs what is left of a child's process group (vitest leaves workers). */
function killGroup(child) {
  try {
    process.kill(-child.pid, "SIGKILL")
  } catch {
    // the group has already gone
  }
}

/**
 * Runs the processes together, each in a process group of its own, so that only this script
 * decides what they get: one Ctrl-C reaches us from the terminal and again relayed by npm, and an
 * Effect program that gets a second signal skips its graceful shutdown. So the first signal (or
 * exit) sends one signal to each process itself; a signal more
 * than a second later, or 10 s after a process exited, forces SIGKILL. A process's group is
 * killed when it exits, so nothing it started outlives it.
 * `exited` resolves to the first non-zero exit status, else 0.
 */
function supervise(processes, env) {
  const children = processes.map(([command, args, own = {}]) =>
    spawn(command, args, { cwd: ROOT, env: { ...env, ...own }, stdio: "inherit", detached: true })
  )
  let signalled = false
  const forward = (signal) => {
    if (signalled) return
    signalled = true
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  }
  const killAll = () => children.forEach(killGroup)
  let killTimer
  const stop = () => {
    forward("SIGTERM")
    killTimer ??= setTimeout(killAll, 10_000).unref()
  }
  let firstSignalAt = 0
  const onSignal = (signal) => {
    if (firstSignalAt === 0) firstSignalAt = Date.now()
    else if (Date.now() - firstSignalAt > 1000) killAll()
    forward(signal === "SIGHUP" ? "SIGTERM" : signal)
  }
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, onSignal)

  const exited = new Promise((resolve) => {
    let firstFailure = 0
    let running = children.length
    const settle = (status) => {
      if (firstFailure === 0) firstFailure = status
      if (--running === 0) resolve(firstFailure)
      else stop()
    }
    for (const child of children) {
      // A program that cannot be spawned reports only "error"; one that ran reports "exit".
      child.once("error", (error) => child.pid === undefined && (warn(error.message), settle(127)))
      child.once("exit", (code, signal) => {
        killGroup(child)
        settle(code ?? 128 + os.constants.signals[signal])
      })
    }
  })
  return { exited, stop, isStopping: () => signalled }
}

/** True once /readyz answers 200: an open port is not readiness, and a hung request is retried. */
async function waitUntilReady(url, timeoutMs, isStopping) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline && !isStopping()) {
    const status = await fetch(url, { signal: AbortSignal.timeout(1000) }).then((r) => r.status, () => 0)
    if (status === 200) return true
    await sleep(250)
  }
  return false
}

/** Whether something already listens on the port: its answers must not pass for ours (D15). */
const portInUse = (port) =>
  new Promise((resolve) => {
    const probe = createServer()
    probe.once("error", (error) => resolve(error.code === "EADDRINUSE"))
    probe.listen(Number(port), () => probe.close(() => resolve(false)))
  })

async function runCommand(command, args, env) {
  const port = process.env.PORT ?? "8080"
  if (command === "start" && await portInUse(port)) {
    throw new SetupError(`port ${port} is already in use (another instance?); stop it or set PORT`)
  }
  const session = supervise(COMMANDS[command](args), env)
  if (command !== "start") return session.exited
  if (await waitUntilReady(`http://127.0.0.1:${port}/readyz`, 60_000, session.isStopping)) {
    log(`Account API ready on http://localhost:${port}`)
  } else if (!session.isStopping()) {
    warn("the API was not ready within 60 s; stopping it")
    session.stop()
    await session.exited
    return 1
  }
  return session.exited
}

/** What each of `npm run lint`'s commands does, as the phase's log lines say it. */
const LINT_PHASES = {
  eslint: "linting (ESLint, with dprint's formatting)",
  tsc: "type-checking (tsc): every file, tests included, then the console's browser code",
  "effect-language-service": "language-service diagnostics (Effect)"
}
/** How often a phase still running says so: a quiet minute looks like a hang. */
const LINT_HEARTBEAT_MS = 30_000

/**
 * Runs one command of the lint script as `npm run` would (node_modules/.bin first on PATH);
 * resolves to its status and what it printed, kept until it ends so that phases running side by
 * side never interleave their lines.
 */
function runLintPhase(command, onHeartbeat) {
  const env = { ...process.env, PATH: [path.join(ROOT, "node_modules", ".bin"), ...pathDirs()].join(path.delimiter) }
  return new Promise((resolve) => {
    const child = spawn(command, { cwd: ROOT, env, shell: true, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    const keep = (chunk) => (output += chunk.toString("utf8"))
    child.stdout.on("data", keep)
    child.stderr.on("data", keep)
    const heartbeat = setInterval(onHeartbeat, LINT_HEARTBEAT_MS)
    child.once("error", (error) => (clearInterval(heartbeat), resolve({ status: 127, output: error.message })))
    child.once(
      "exit",
      (
        code,
        signal
      ) => (clearInterval(heartbeat), resolve({ status: code ?? 128 + os.constants.signals[signal], output }))
    )
  })
}

/**
 * `npm test` holds the style as CI does: ESLint (with dprint's formatting), the type check of
 * every file, tests included, and Effect's language-service diagnostics: `npm run lint`'s
 * commands, read from package.json so the two never differ. They run side by side, as many at
 * once as there are cores, the longest (the language service's) first, each saying when it
 * starts, every half minute that it still runs, and how long it took; what a phase printed is
 * shown when it ends, whole. Resolves when every phase has ended; throws when one failed.
 */
async function lint() {
  const script = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts.lint
  const phases = script.split("&&").map((phase) => phase.trim())
    .sort((a, b) => Number(b.startsWith("effect-language-service")) - Number(a.startsWith("effect-language-service")))
  const started = Date.now()
  const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`
  const failed = []
  const queue = [...phases.entries()]
  const runNext = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const [index, phase] = next
      const what = LINT_PHASES[phase.split(" ")[0]] ?? phase
      log(`${what} [${index + 1}/${phases.length}]: ${phase}`)
      const phaseStarted = Date.now()
      const { output, status } = await runLintPhase(
        phase,
        () => log(`${what}: still running after ${seconds(phaseStarted)}`)
      )
      if (output.trim() !== "") process.stderr.write(output.endsWith("\n") ? output : `${output}\n`)
      if (status === 0) {
        log(`${what}: done in ${seconds(phaseStarted)}`)
      } else {
        warn(`${what}: failed in ${seconds(phaseStarted)} (above): ${phase}`)
        failed.push(what)
      }
    }
  }
  const lanes = Math.max(1, Math.min(phases.length, os.availableParallelism()))
  await Promise.all(Array.from({ length: lanes }, runNext))
  if (failed.length > 0) {
    throw new SetupError(`${failed.join("; ")} failed (above); \`npm run lint:fix\` fixes the formatting`)
  }
  log(`lint passed in ${seconds(started)}`)
}

/**
 * `npm test` also needs Debian's `prometheus` (promtool, for the alert rules) and `pgbouncer` (the
 * pooler the service is tested behind): installed where missing and possible, as the rest is;
 * otherwise the tests that need them are skipped with the reason. Never fatal.
 */
function ensureTestPrograms() {
  const result = spawnSync("bash", [path.join(ROOT, "scripts", "ci-prerequisites.sh"), "--no-chromium"], {
    cwd: ROOT,
    stdio: ["ignore", 2, 2]
  })
  if (result.status !== 0) warn("scripts/ci-prerequisites.sh failed; the tests that need its programs will be skipped")
}

// ---- 0. A tested Node ---------------------------------------------------------------------

/** Set for the set-up's re-run under a tested Node, to the Node it came from: it re-runs once at most. */
const RERUN_FROM = "ACCOUNT_API_SETUP_RERUN_FROM"

/**
 * npm only warns (EBADENGINE, in a log file) when its Node is not one `engines` allows, so under a
 * Node line that is not tested the set-up runs itself again, same arguments and terminal, under
 * the newest tested line, installing it as with-node.mjs does, after one line saying so. Resolves
 * to the re-run's exit status; to undefined when this Node is tested, when it is already the
 * re-run (its Node should have been a tested one: no loop), or when the tested one cannot be had.
 */
async function rerunUnderTestedNode(argv) {
  const running = process.versions.node
  const lines = Object.keys(TESTED_NODE)
  if (lines.includes(running.split(".")[0])) return undefined
  const from = process.env[RERUN_FROM]
  if (from !== undefined) {
    warn(
      `re-run from Node ${from} still runs under Node ${running}, not a tested line (${lines.join(", ")}); carrying on`
    )
    return undefined
  }
  const newest = Math.max(...lines.map(Number))
  log(
    `Node ${running} is not a tested line (${lines.join(", ")}); running under Node ${TESTED_NODE[newest]} (${
      path.relative(ROOT, nodeHome(newest))
    })`
  )
  process.env[RERUN_FROM] = running
  try {
    return await runWithNode(newest, "node", [fileURLToPath(import.meta.url), ...argv], { quiet: true })
  } catch (error) {
    warn(`Node ${TESTED_NODE[newest]} could not be installed (${error.message}); carrying on under Node ${running}`)
    return undefined
  }
}

async function main([command, ...args]) {
  if (!Object.hasOwn(COMMANDS, command ?? "")) {
    warn(`usage: node scripts/setup.mjs ${Object.keys(COMMANDS).join("|")} [-- args...]`)
    return 2
  }
  const owned = [] // stops for the private servers this invocation started, and only those
  try {
    ensureDependencies()
    try {
      ensureBuilt(log)
    } catch (error) {
      throw new SetupError(error.message) // the build has said why on stderr
    }
    if (command === "test") {
      await lint()
      ensureTestPrograms()
    }
    const databaseUrl = await resolveServer(SERVERS.postgres, owned)
    const redisUrl = await resolveServer(SERVERS.redis, owned)
    await ensureDatabase(databaseUrl)
    return await runCommand(command, args, { ...process.env, DATABASE_URL: databaseUrl, REDIS_URL: redisUrl })
  } catch (error) {
    warn(error instanceof SetupError ? error.message : error.stack)
    return 1
  } finally {
    for (const stop of owned.reverse()) {
      try {
        stop()
      } catch (error) {
        warn(error.message)
      }
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const argv = process.argv.slice(2)
  process.exit(await rerunUnderTestedNode(argv) ?? await main(argv))
}
