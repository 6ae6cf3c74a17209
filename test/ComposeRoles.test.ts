import { describe, expect, it } from "@effect/vitest"
import { Queue } from "bullmq"
import { Effect, Option } from "effect"
import { Redis as IORedis } from "ioredis"
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import path from "node:path"
import pg from "pg"
import { programCommand, ROOT } from "../scripts/programs.mjs"
import { childEnvironment, runToEnd } from "./support/childEnvironment.js"
import { privatePostgres } from "./support/privatePostgres.js"
import { freePort, waitFor } from "./support/processes.js"

/**
 * What docker-compose.yml sets up, on servers of the test's own (D14): the secrets as
 * scripts/compose-secrets.mjs writes them, PostgreSQL's roles as the image's init step runs
 * deploy/postgres/init-roles.sh, and Redis's users from the ACL file it mounts.
 */

const secretsDir = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), "account-api-compose-")), "secrets")
    const made = spawnSync(process.execPath, [path.join(ROOT, "scripts", "compose-secrets.mjs"), dir], {
      encoding: "utf8",
      env: childEnvironment()
    })
    expect(made.status, made.stderr).toBe(0)
    return dir
  }),
  (dir) => Effect.sync(() => rmSync(path.dirname(dir), { recursive: true, force: true }))
)

const secret = (dir: string, name: string) => readFileSync(path.join(dir, name), "utf8").trim()

/** A PostgreSQL error's SQLSTATE, or "none" when the statement succeeded. */
const sqlState = (run: Promise<unknown>) =>
  run.then(() => "none", (error: unknown) => (error as { code?: string }).code ?? String(error))

const asRole = (url: string, role: string) => {
  const parsed = new URL(url)
  parsed.username = role
  return parsed.href
}

describe("compose's PostgreSQL roles (deploy/postgres/init-roles.sh)", () => {
  it.scopedLive(
    "the migrator migrates without being a superuser; the app reads and writes rows and nothing more",
    () =>
      Effect.gen(function*() {
        const secrets = yield* secretsDir
        const server = yield* privatePostgres("account_api")
        const url = new URL(server.url)
        const init = spawnSync("bash", [path.join(ROOT, "deploy", "postgres", "init-roles.sh")], {
          encoding: "utf8",
          env: childEnvironment({
            PGHOST: url.hostname,
            PGPORT: url.port,
            POSTGRES_USER: decodeURIComponent(url.username),
            POSTGRES_DB: "account_api",
            MIGRATOR_PASSWORD_FILE: path.join(secrets, "db_migrator_password"),
            APP_PASSWORD_FILE: path.join(secrets, "db_app_password")
          })
        })
        expect(init.status, init.stderr).toBe(0)

        const superuser = new pg.Client({ connectionString: server.url })
        yield* Effect.acquireRelease(
          Effect.promise(() => superuser.connect()),
          () => Effect.promise(() => superuser.end())
        )
        const roles = yield* Effect.promise(() =>
          superuser.query<{ rolname: string; rolsuper: boolean; rolcreaterole: boolean; scram: boolean }>(
            `SELECT rolname, rolsuper, rolcreaterole, rolpassword LIKE 'SCRAM-SHA-256$%' AS scram
           FROM pg_authid WHERE rolname LIKE 'account_api_%' ORDER BY rolname`
          )
        )
        expect(roles.rows).toEqual([
          { rolname: "account_api_app", rolsuper: false, rolcreaterole: false, scram: true },
          { rolname: "account_api_migrator", rolsuper: false, rolcreaterole: false, scram: true }
        ])

        // The migration, as compose's migrate service runs it, then the app's start-up check, as the app.
        const cli = (role: string, password: string) => {
          const [file, args, own] = programCommand("cli", { args: ["migrate"] })
          return Effect.promise(() =>
            runToEnd(file, args, {
              cwd: ROOT,
              env: {
                ...own,
                LOG_LEVEL: "warning",
                DATABASE_URL: asRole(server.url, role),
                DATABASE_PASSWORD_FILE: path.join(secrets, password)
              },
              timeout: 60_000
            })
          )
        }
        const migrated = yield* cli("account_api_migrator", "db_migrator_password")
        expect(migrated.status, migrated.stderr).toBe(0)
        const started = yield* cli("account_api_app", "db_app_password")
        expect(started.status, started.stderr).toBe(0)

        const owners = yield* Effect.promise(() =>
          superuser.query<{ owner: string; count: string }>(
            `SELECT tableowner AS owner, count(*) FROM pg_tables WHERE schemaname = 'public' GROUP BY 1`
          )
        )
        expect(owners.rows.map((row) => row.owner)).toEqual(["account_api_migrator"])
        expect(Number(owners.rows[0]?.count)).toBeGreaterThan(5)

        const app = new pg.Client({ connectionString: asRole(server.url, "account_api_app") })
        yield* Effect.acquireRelease(Effect.promise(() => app.connect()), () => Effect.promise(() => app.end()))
        const rights = yield* Effect.promise(() =>
          app.query<{ table: string; dml: boolean; truncate: boolean }>(
            `SELECT tablename AS table,
                  has_table_privilege(format('%I', tablename), 'SELECT, INSERT, UPDATE, DELETE') AS dml,
                  has_table_privilege(format('%I', tablename), 'TRUNCATE') AS truncate
           FROM pg_tables WHERE schemaname = 'public'`
          )
        )
        expect(rights.rows.filter((row) => !row.dml || row.truncate)).toEqual([])
        // Rows: a read and a write inside a transaction rolled back; notifications.
        expect(
          yield* Effect.promise(() =>
            sqlState(
              app.query("BEGIN").then(() => app.query("SELECT count(*) FROM users")).then(() => app.query("ROLLBACK"))
            )
          )
        ).toBe("none")
        expect(yield* Effect.promise(() => sqlState(app.query("LISTEN sign_in_changes")))).toBe("none")
        // No DDL, and the ledger stays append-only: its trigger holds and the app cannot lift it.
        expect(yield* Effect.promise(() => sqlState(app.query("CREATE TABLE intruder (id int)")))).toBe("42501")
        expect(
          yield* Effect.promise(() =>
            sqlState(app.query("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only"))
          )
        ).toBe("42501")
        expect(yield* Effect.promise(() => sqlState(app.query("TRUNCATE ledger_entries")))).toBe("42501")
        const update = yield* Effect.promise(() => sqlState(app.query("UPDATE ledger_entries SET sequence = sequence")))
        expect(update).not.toBe("none")
        expect(yield* Effect.promise(() => sqlState(app.query("DELETE FROM ledger_entries")))).not.toBe("none")
        // And the migrator makes no roles.
        const migrator = new pg.Client({ connectionString: asRole(server.url, "account_api_migrator") })
        yield* Effect.acquireRelease(
          Effect.promise(() => migrator.connect()),
          () => Effect.promise(() => migrator.end())
        )
        expect(
          yield* Effect.promise(() => sqlState(migrator.query("CREATE ROLE other")))
        ).toBe("42501")
      }),
    120_000
  )
})

/**
 * A Redis of the test's own started as compose starts it: `--aclfile` the secret, so that no
 * connection is trusted before it signs in; ready when the `healthcheck` user's PING answers.
 */
const redisWithAcl = (aclFile: string) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--aclfile", aclFile], {
          stdio: "ignore",
          env: childEnvironment()
        })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    // Any answer to a bare PING (NOAUTH included) means the server is up. A client library's
    // connect can leave its PING queued for good when the first connection attempt is refused.
    const probe = Effect.async<Option.Option<true>>((resume) => {
      let answered = false
      const socket = connect(port, "127.0.0.1", () => socket.write("PING\r\n"))
      const answer = (up: Option.Option<true>) => {
        if (answered) return
        answered = true
        socket.destroy()
        resume(Effect.succeed(up))
      }
      socket.setTimeout(1_000, () => answer(Option.none()))
      socket.once("data", () => answer(Option.some(true)))
      socket.once("error", () => answer(Option.none()))
      return Effect.sync(() => socket.destroy())
    })
    yield* waitFor(`a Redis with the ACL file answers on ${port}`, probe, { limit: "10 seconds", every: "50 millis" })
    return { port, pid: child.pid }
  })

describe("compose's Redis users (redis_users.acl)", () => {
  // Live clock: the server's start is waited for with real sleeps (the test clock never moves).
  it.scopedLive(
    "no anonymous access; runners reach the settlement queue and nothing else; the service all",
    () =>
      Effect.gen(function*() {
        const secrets = yield* secretsDir
        const { port } = yield* redisWithAcl(path.join(secrets, "redis_users.acl"))
        const client = (user?: string, password?: string) =>
          Effect.acquireRelease(
            Effect.sync(() => {
              const connection = new IORedis({
                port,
                ...(user === undefined ? {} : { username: user, password: password ?? "" }),
                maxRetriesPerRequest: null,
                lazyConnect: true,
                retryStrategy: () => null
              })
              connection.on("error", () => {})
              return connection
            }),
            (connection) => Effect.sync(() => connection.disconnect())
          )
        const outcome = (run: Promise<unknown>) =>
          run.then((value) => `ok ${String(value)}`, (error: unknown) => String(error))

        /** What Redis first answers a bare socket that sends `command` (inline protocol). */
        const reply = (command: string) =>
          Effect.promise(() =>
            new Promise<string>((resolve) => {
              const socket = connect(port, "127.0.0.1", () => socket.write(`${command}\r\n`))
              socket.once("data", (data) => {
                socket.destroy()
                resolve(data.toString("utf8"))
              })
              socket.once("error", (error) => resolve(String(error)))
            })
          )
        // A client that does not sign in is refused whatever it asks; a wrong password too.
        expect(yield* reply("GET bull:settlement:id")).toMatch(/^-NOAUTH/)
        expect(yield* reply("AUTH runner wrong")).toMatch(/^-WRONGPASS/)
        expect(yield* reply(`AUTH runner ${secret(secrets, "redis_runner_password")}`)).toBe("+OK\r\n")

        const probe = yield* client("healthcheck", "anything")
        yield* Effect.promise(() => probe.connect())
        expect(yield* Effect.promise(() => outcome(probe.ping()))).toBe("ok PONG")
        expect(yield* Effect.promise(() => outcome(probe.get("bull:settlement:id")))).toMatch(/NOPERM/)

        // A runner adds a job as plain BullMQ does (D8), and can touch nothing but that queue.
        const runner = yield* client("runner", secret(secrets, "redis_runner_password"))
        yield* Effect.promise(() => runner.connect())
        const queue = yield* Effect.acquireRelease(
          Effect.sync(() => new Queue("settlement", { connection: runner })),
          (queue) => Effect.promise(() => queue.close())
        )
        const job = yield* Effect.promise(() => queue.add("spend", { probe: true }, { jobId: "acl-probe" }))
        expect(job.id).toBe("acl-probe")
        expect(yield* Effect.promise(() => outcome(runner.set("account-api:login:x", "1")))).toMatch(/NOPERM/)
        expect(yield* Effect.promise(() => outcome(runner.get("bull:other-queue:id")))).toMatch(/NOPERM/)
        expect(yield* Effect.promise(() => outcome(runner.flushall()))).toMatch(/NOPERM/)

        const service = yield* client("account-api", secret(secrets, "redis_app_password"))
        yield* Effect.promise(() => service.connect())
        expect(yield* Effect.promise(() => outcome(service.set("account-api:probe", "1")))).toBe("ok OK")
        expect(yield* Effect.promise(() => outcome(service.hget("bull:settlement:acl-probe", "name")))).toBe("ok spend")
      }),
    60_000
  )
})
