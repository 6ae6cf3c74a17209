import { spawnSync } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs"
import { tmpdir, userInfo } from "node:os"
import path from "node:path"
import { findPostgresBinDir } from "../../scripts/setup.mjs"
import { freePort } from "./child.js"
import type { Cleanup } from "./cleanup.js"
import { endQuietly, openClient } from "./pg.js"

const AS_ROOT = process.getuid?.() === 0

/**
 * The settings the bench's server takes over from the machine's shared one, so its figures stay
 * comparable with runs measured there (memory, durability, autovacuum, WAL sizes).
 */
const COPIED_SETTINGS = [
  "shared_buffers",
  "autovacuum",
  "fsync",
  "synchronous_commit",
  "full_page_writes",
  "max_wal_size",
  "min_wal_size",
  "work_mem",
  "effective_cache_size",
  "random_page_cost",
  "jit"
] as const

/** The API's, the baseline's, three workers' and the webhooks process's pools, the ceiling's 32 and the bench's own. */
const MAX_CONNECTIONS = 300

/** What the bench's server adds: the statements' planning and execution times (`settlement_planning_share`). */
const STATEMENT_STATISTICS = [
  "shared_preload_libraries=pg_stat_statements",
  "pg_stat_statements.track_planning=on",
  "pg_stat_statements.max=20000",
  "pg_stat_statements.track=top"
] as const

export interface PrivatePostgres {
  /** The server's URL, without a database. */
  readonly url: string
  /** The postmaster's process id: its processes are the ones whose CPU the run counts. */
  readonly pid: number
  /** Whether `pg_stat_statements` is loaded (its library was installed), so planning time can be read. */
  readonly statementStatistics: boolean
  /** The settings it took over from the machine's server, as `-c` options. */
  readonly copied: ReadonlyArray<string>
}

const postgresUser = () => {
  const fields = readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.startsWith("postgres:"))
    ?.split(":")
  if (fields?.[2] === undefined || fields[3] === undefined) {
    throw new Error("running as root needs a postgres user to run the server as")
  }
  return { uid: Number(fields[2]), gid: Number(fields[3]) }
}

/** The shared server's value of each copied setting, as `name=value`; none if it does not answer. */
const settingsOf = async (serverUrl: string): Promise<ReadonlyArray<string>> => {
  const url = new URL(serverUrl)
  url.pathname = "/postgres"
  try {
    const client = await openClient({ connectionString: url.toString(), connectionTimeoutMillis: 3000 })
    try {
      const { rows } = await client.query<{ readonly name: string; readonly value: string }>(
        `SELECT name, current_setting(name) AS value FROM pg_settings WHERE name = ANY($1::text[])`,
        [COPIED_SETTINGS]
      )
      return rows.map((row) => `${row.name}=${row.value}`)
    } finally {
      await endQuietly(client)
    }
  } catch {
    return []
  }
}

/**
 * Starts a PostgreSQL server of the run's own from the machine's binaries (as the tests' private
 * servers start, `test/support/privatePostgres.ts`): a fresh cluster in a temporary directory on
 * a free port, with the shared server's settings (`COPIED_SETTINGS`, read from `sharedUrl`) and
 * `pg_stat_statements` loaded with planning tracked. Stopped and removed after every other step
 * of the clean-up. Undefined when the binaries are not installed.
 */
export const startPrivatePostgres = async (
  cleanup: Cleanup,
  sharedUrl: string,
  log: (line: string) => void
): Promise<PrivatePostgres | undefined> => {
  const binDir = findPostgresBinDir()
  if (binDir === undefined) return undefined
  // The directory may hold links (as /usr/local/bin may): the libraries lie beside the real binary.
  const realBinDir = path.dirname(realpathSync(path.join(binDir, "postgres")))
  const libDir = spawnSync(path.join(realBinDir, "pg_config"), ["--pkglibdir"], { encoding: "utf8" }).stdout?.trim() ||
    path.join(realBinDir, "..", "lib")
  const statementStatistics = existsSync(path.join(libDir, "pg_stat_statements.so"))
  const dataDir = mkdtempSync(path.join(tmpdir(), "account-api-bench-postgres-"))
  const role = AS_ROOT ? "postgres" : userInfo().username
  if (AS_ROOT) {
    const { gid, uid } = postgresUser()
    chownSync(dataDir, uid, gid)
  }
  const tool = (name: string, args: ReadonlyArray<string>) => {
    const [file, fileArgs] = AS_ROOT
      ? ["runuser", ["-u", "postgres", "--", path.join(binDir, name), ...args]]
      : [path.join(binDir, name), [...args]]
    const result = spawnSync(file, fileArgs, { encoding: "utf8" })
    if (result.status !== 0) throw new Error(`${name} ${args.join(" ")} failed: ${result.stderr}`)
  }
  const cluster = path.join(dataDir, "cluster")
  cleanup.defer("remove the bench's PostgreSQL cluster", () => {
    rmSync(dataDir, { recursive: true, force: true })
    return Promise.resolve()
  }, { last: true })
  tool("initdb", ["-D", cluster, "--auth=trust", "-U", role, "--no-sync"])
  const port = await freePort()
  const copied = await settingsOf(sharedUrl)
  const options = [
    `-p ${port}`,
    `-k '${dataDir}'`,
    "-c listen_addresses=127.0.0.1",
    ...copied.map((setting) => `-c ${setting}`),
    // Every suite's processes and clients are on this one server, and the scale comparison adds
    // two databases with a worker each beside them: more than the shared server's 100 at once.
    `-c max_connections=${MAX_CONNECTIONS}`,
    ...(statementStatistics ? STATEMENT_STATISTICS.map((setting) => `-c ${setting}`) : [])
  ].join(" ")
  // pg_ctl passes -o through a shell, hence the quotes around the socket directory.
  tool("pg_ctl", ["-D", cluster, "-l", path.join(dataDir, "server.log"), "-o", options, "-w", "start"])
  // Registered after the cluster's removal, so it runs before it (last steps run in reverse).
  cleanup.defer("stop the bench's PostgreSQL", () => {
    tool("pg_ctl", ["-D", cluster, "-m", "fast", "-w", "stop"])
    return Promise.resolve()
  }, { last: true })
  const pid = Number(readFileSync(path.join(cluster, "postmaster.pid"), "utf8").split("\n")[0])
  log(
    `a PostgreSQL of the run's own on 127.0.0.1:${port} (pid ${pid}; ${
      copied.length === 0 ? "default settings" : `the shared server's ${copied.join(", ")}`
    }${statementStatistics ? "; pg_stat_statements with planning tracked" : "; no pg_stat_statements library"})`
  )
  return { url: `postgres://${role}@127.0.0.1:${port}`, pid, statementStatistics, copied }
}
