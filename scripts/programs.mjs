// How the service's programs are built and launched. `npm start` (scripts/setup.mjs), the
// benchmark (bench/lib) and the tests that run real processes (test/support/processes.ts) all
// launch through here, so what is measured and tested is what `npm start` runs. Only Node
// built-ins are imported: setup imports this before it has installed anything.
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const DIST = path.join(ROOT, "dist")
const STAMP = path.join(DIST, ".build-stamp")
/** What the build reads: the sources it compiles and everything that decides how. */
const BUILD_INPUTS = [
  "src",
  "workers",
  "migrations",
  "scripts/build.mjs",
  "scripts/build-console.mjs",
  "console", // the console's page, script and style (D20)
  "packages/client/src", // the client package's browser entry, bundled into the console
  "packages/client/package.json", // its sideEffects, which decide what of it the console's bundle keeps
  "scripts/programs.mjs", // PROGRAMS: which entry points build.mjs builds
  "tsconfig.json",
  "package.json",
  "package-lock.json"
]

/**
 * The servers' old-generation limit, in MB. Its live part was ~55 MB in the API and ~38 MB in
 * the worker, under the bench's loads as at rest (full collections forced mid-load), before the
 * programs were bundled (scripts/build.mjs; the API's whole heap is 44 MB at rest since); the
 * rest of what it grows to is garbage not yet collected, not a leak. With no limit V8 takes one from the
 * machine's memory (4 GB here) and, at 2 GB or more, lets the old generation grow to 4x its live
 * size between full collections: under 30 s of load the API's heap reached 175 MB and its RSS
 * 220-290 MB, the worker's RSS 225-265 MB. Below 2 GB, V8 lets it grow 1.3-2x (1.4x at 512), so
 * it collects sooner: peak RSS 185-195 MB (API) and 150-165 MB (worker). The cost is more full
 * collections: main-thread GC pauses grew by ~1 us per request and ~9 us per settlement job,
 * below the noise of the bench's CPU figures. 512 is 9x the API's live heap, so a burst of live
 * data means more collections, not an out-of-memory crash.
 *
 * The young generation: Node 22 and 24 let V8 size the semi-spaces itself, larger than Node 20's
 * 16 MB, and under the settlement bench (events and webhooks on) the API's and the worker's peak
 * RSS reached 281 and 288 MB. At most 32 MB each: 226 and 221 MB, at the same worker CPU per job
 * (560 against 567 µs); at 16 MB, 190 and 188 MB but ~8% more CPU per job (more scavenges). So
 * the worker, whose CPU per job is what settlement is measured by, keeps 32 MB.
 *
 * The API peaks at sign-in after the HTTP load, two argon2id hashes (2 x 19 MiB) on top of a heap
 * that load has grown: with 32 MB semi-spaces 342-349 MB over two runs of the HTTP and login
 * suites, with 16 MB 301-317 MB, with 8 MB 283-296 MB (four runs). Its CPU per wallet read over
 * the baseline's stayed within the runs' spread at 8 MB (1.59-1.83x at 16 connections, against
 * 1.63-1.96x at 16 MB), as did sign-ins/s and the wallet-read p99. So the API takes 8 MB.
 * (Old-generation growth held at 1.1x, `--heap-growing-percent=10`, took another ~20 MB off
 * the peak but cost ~30% more CPU per request in full collections: not taken.)
 *
 * The image's CMD and compose's worker and webhooks commands repeat these flags;
 * test/Compose.test.ts holds them equal to what is here.
 */
const OLD_GENERATION = "--max-old-space-size=512"
const API_HEAP = [OLD_GENERATION, "--max-semi-space-size=8"]
const WORKER_HEAP = [OLD_GENERATION, "--max-semi-space-size=32"]

/**
 * glibc serves a block of 128 KiB or more with mmap and unmaps it when freed, until one such
 * block is freed: then it raises that threshold to the block's size (up to 32 MiB), and later
 * blocks that size come from the thread's arena and stay resident when freed. An argon2id hash
 * works in 19 MiB on a thread of libuv's pool, so after a burst of sign-ins each thread that ran
 * one kept its 19 MiB: the API's peak RSS rose ~18 MB (247 to 229 MB with a fixed threshold, at
 * the same sign-in rate). A fixed 1 MiB threshold hands such blocks back when freed. Other C
 * libraries ignore the variable.
 */
const API_ENV = { MALLOC_MMAP_THRESHOLD_: "1048576" }

/**
 * The programs, each a TypeScript entry point run as the JavaScript scripts/build.mjs makes of it
 * in `dist/` (why a bundle, there), not through tsx: tsx's loader runs its hooks in a thread of
 * its own with a V8 heap of its own, which stays for the life of the process, some 80 MB of each
 * process's RSS that does nothing after start-up.
 */
export const PROGRAMS = {
  api: { source: "src/main.ts", nodeArgs: API_HEAP, env: API_ENV },
  // The settlement worker: settlement jobs and the hold-expiry sweep.
  worker: { source: "workers/settlement.ts", nodeArgs: WORKER_HEAP, env: {} },
  // The webhook relay and deliveries, which ran in the worker until they got a process of their
  // own: it keeps the worker's flags, under which they were measured.
  webhooks: { source: "workers/webhooks.ts", nodeArgs: WORKER_HEAP, env: {} },
  cli: { source: "src/cli.ts", nodeArgs: [], env: {} }
}

/**
 * Node's on-disk cache of compiled code (V8's, keyed by each file's contents): without it every
 * start compiles the 2 MB bundle and what it imports from node_modules again, a third of a CLI
 * call's CPU (`npm run cli` answers in about a second less on a loaded machine). Set for every
 * program launched from here (set-up, the tests, the bench); the image, with no writable
 * checkout, runs without it.
 */
const COMPILE_CACHE = path.join(ROOT, ".data", "compile-cache")

/** `src/main.js` for `src/main.ts`: where a program's build goes, under the output folder. */
export const compiledName = (source) => source.replace(/\.ts$/, ".js")

/** `dist/src/main.js` for `src/main.ts`. */
export const compiledPath = (source) => path.join(DIST, compiledName(source))

/**
 * The command that runs a program: `[file, args, env]` for `spawn`, from the repository root,
 * `env` to add to the environment it is given. `nodeArgs` come after the program's own (a later
 * Node flag wins); `args` go to the program.
 */
export function programCommand(name, { nodeArgs = [], args = [] } = {}) {
  const program = PROGRAMS[name]
  if (program === undefined) throw new Error(`no program named ${name}`)
  return [process.execPath, [...program.nodeArgs, ...nodeArgs, compiledPath(program.source), ...args], {
    NODE_COMPILE_CACHE: COMPILE_CACHE,
    ...program.env
  }]
}

/** Every input file's path and contents, in a fixed order: renames and deletions count too. */
function buildInputsHash() {
  const hash = createHash("sha256")
  const add = (relative) => {
    const absolute = path.join(ROOT, relative)
    if (!existsSync(absolute)) return
    if (statSync(absolute).isDirectory()) {
      for (const name of readdirSync(absolute).sort()) add(path.join(relative, name))
    } else {
      hash.update(`${relative}\0`).update(readFileSync(absolute)).update("\0")
    }
  }
  for (const input of BUILD_INPUTS) add(input)
  return hash.digest("hex")
}

/**
 * Builds the programs into `dist/` (scripts/build.mjs) unless it already holds what the current
 * sources build to. Returns whether it built. The output is built beside `dist/` and swapped in
 * whole, so a program starting meanwhile never sees half of it, and files of deleted sources do
 * not linger. Types are not checked here (`npm run check` does that): a type error does not stop
 * `npm start`.
 */
export function ensureBuilt(log) {
  const wanted = buildInputsHash()
  if (existsSync(STAMP) && readFileSync(STAMP, "utf8") === wanted) return false
  log("building the programs into dist/ (scripts/build.mjs)")
  const staging = path.join(ROOT, `.dist-${process.pid}`)
  const retired = path.join(ROOT, `.dist-old-${process.pid}`)
  rmSync(staging, { recursive: true, force: true })
  try {
    const result = spawnSync(process.execPath, [path.join(ROOT, "scripts", "build.mjs"), staging], {
      cwd: ROOT,
      stdio: ["ignore", 2, 2]
    })
    if (result.status !== 0) {
      throw new Error(`scripts/build.mjs failed (${result.error?.message ?? `exit ${result.status ?? result.signal}`})`)
    }
    writeFileSync(path.join(staging, ".build-stamp"), wanted)
    if (existsSync(DIST)) renameSync(DIST, retired)
    renameSync(staging, DIST)
  } finally {
    rmSync(staging, { recursive: true, force: true })
    rmSync(retired, { recursive: true, force: true })
  }
  return true
}
