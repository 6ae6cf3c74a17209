// `npm run pack:client`: the client package's tarball in one command, from a fresh clone as from a
// working checkout. The package is compiled by the repository's TypeScript from the repository's
// sources, so the repository's dependencies are installed first, as `npm start` installs them; then
// the package is built and packed in packages/client. Prints the tarball's path on stdout, alone
// (npm's and the build's output go to stderr).
import { spawnSync } from "node:child_process"
import path from "node:path"
import { ROOT } from "./programs.mjs"
import { ensureDependencies } from "./setup.mjs"

const PACKAGE = path.join(ROOT, "packages", "client")

/** Runs npm in the package's folder; its stdout is answered, the rest goes to stderr. */
const npm = (args) => {
  const result = spawnSync("npm", args, { cwd: PACKAGE, stdio: ["ignore", "pipe", 2], encoding: "utf8" })
  if (result.status !== 0) {
    process.stderr.write(result.stdout ?? "")
    throw new Error(
      `\`npm ${args.join(" ")}\` failed in packages/client (${result.error?.message ?? `exit ${result.status}`})`
    )
  }
  return result.stdout
}

try {
  ensureDependencies()
  process.stderr.write(npm(["run", "build"]))
  // Built just above: packing runs no script, so npm's JSON is all its stdout holds.
  const [packed] = JSON.parse(npm(["pack", "--json", "--ignore-scripts"]))
  process.stdout.write(`${path.join(PACKAGE, packed.filename)}\n`)
} catch (error) {
  process.stderr.write(`[pack:client] ${error.message}\n`)
  process.exit(1)
}
