import { spawn } from "node:child_process"

/**
 * The environment of every program a test starts (set-up, npm, the service's programs, a shell
 * script): what a login shell hands its commands, plus what the test names. Never the outer run's
 * own variables: set-up's re-run marker (`ACCOUNT_API_SETUP_RERUN_FROM`) would make a set-up the
 * test starts believe it is already a re-run, npm's lifecycle variables (`npm_*`, `INIT_CWD`)
 * would tell an `npm` the test starts which package and script it belongs to, and vitest's
 * (`VITEST*`, `NODE_ENV=test`) would make a program behave as a test of its own.
 *
 * PATH is the run's: the tested Node first, as `npm test` leaves it (docs/development.md). The
 * machine's trust and proxy settings are a shell's too: an `npm install` the test starts reaches
 * the registry the way the outer one did (a proxy that re-signs TLS needs its certificate).
 */
const SHELL_VARIABLES = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TERM",
  "TMPDIR",
  "TZ",
  "PGUSER",
  "PGPASSWORD",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy"
] as const

const isShellVariable = (name: string) =>
  (SHELL_VARIABLES as ReadonlyArray<string>).includes(name) ||
  name.startsWith("LC_")

export const childEnvironment = (named: Readonly<Record<string, string>> = {}): Record<string, string> => ({
  ...Object.fromEntries(
    Object.entries(process.env).flatMap(([name, value]) =>
      value !== undefined && isShellVariable(name) ? [[name, value]] : []
    )
  ),
  ...named
})

export interface Finished {
  /** The exit code; null when a signal (or the time limit) ended it. */
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
  readonly seconds: number
}

/**
 * Runs a program to its end without blocking this process: a test worker whose event loop a
 * `spawnSync` holds for seconds misses vitest's own calls ("Timeout calling onTaskUpdate"), and
 * a loaded machine makes seconds of any program. `env` is what the test names, on top of
 * childEnvironment's; `timeout` the bound the program gets (SIGKILL after it).
 */
export const runToEnd = (
  file: string,
  args: ReadonlyArray<string>,
  options: {
    readonly cwd: string
    readonly env?: Readonly<Record<string, string>>
    readonly input?: string
    readonly timeout: number
  }
): Promise<Finished> =>
  new Promise((resolve) => {
    const started = performance.now()
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: childEnvironment(options.env),
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeout)
    child.once("error", (error) => (stderr += `spawn failed: ${error.message}\n`))
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ status: code, stdout, stderr, seconds: (performance.now() - started) / 1000 })
    })
    child.stdin.end(options.input ?? "")
  })
