// Creates the secrets docker-compose.yml reads as files (D14), in `.secrets/` (or the directory
// given): random passwords and the auth secret, each made once and kept, and Redis's ACL file,
// written again from the Redis passwords each run. Run it once before `docker compose up`:
//
//   node scripts/compose-secrets.mjs [directory]
//
// The directory is readable by its owner only; the files in it are readable by all (0644), since
// the containers read them as users of their own (postgres, redis, node) through bind mounts.
// Only Node built-ins are imported.
import { createHash, randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import path from "node:path"
import { pathToFileURL } from "node:url"
import { ROOT } from "./programs.mjs"

/** Each secret file, what reads it. */
export const SECRETS = {
  postgres_password: "PostgreSQL's superuser (postgres), used by nothing but the server's own set-up",
  db_migrator_password: "account_api_migrator: the migrate service",
  db_app_password: "account_api_app: the API and the worker",
  redis_app_password: "Redis user account-api: the API and the worker",
  redis_runner_password: "Redis user runner: session runners, the settlement queue's keys only",
  auth_secret: "AUTH_SECRET: signs sign-in tokens, the same for every API process"
}

/** Redis users (D14): no anonymous access; the service; runners on the queue's keys only; a health probe. */
export const redisAcl = ({ appPassword, runnerPassword, queuePrefix = "bull", queue = "settlement" }) => {
  const hash = (password) => `#${createHash("sha256").update(password).digest("hex")}`
  const keys = `${queuePrefix}:${queue}`
  return [
    "user default off resetkeys resetchannels -@all",
    `user account-api on ${hash(appPassword)} ~* &* +@all`,
    // BullMQ asks INFO (dangerous, for the server's version) and runs its Lua scripts on the queue's keys.
    `user runner on ${
      hash(runnerPassword)
    } resetkeys ~${keys}:* resetchannels &${keys}:* +@all -@admin -@dangerous +info`,
    "user healthcheck on nopass resetkeys resetchannels -@all +ping",
    ""
  ].join("\n")
}

export function writeSecrets(dir) {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  chmodSync(dir, 0o700)
  const created = []
  for (const name of Object.keys(SECRETS)) {
    const file = path.join(dir, name)
    if (existsSync(file)) continue
    writeFileSync(file, randomBytes(name === "auth_secret" ? 48 : 24).toString("base64url"), { mode: 0o644 })
    created.push(name)
  }
  const read = (name) => readFileSync(path.join(dir, name), "utf8").trim()
  writeFileSync(
    path.join(dir, "redis_users.acl"),
    redisAcl({ appPassword: read("redis_app_password"), runnerPassword: read("redis_runner_password") }),
    { mode: 0o644 }
  )
  return { created, read }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const dir = path.resolve(process.argv[2] ?? path.join(ROOT, ".secrets"))
  const { created, read } = writeSecrets(dir)
  const say = (line) => process.stderr.write(`${line}\n`)
  say(created.length > 0 ? `created in ${dir}: ${created.join(", ")}` : `all secrets already exist in ${dir}`)
  say("With docker-compose.override.yml's ports, `npm start` and `npm test` reach them with:")
  say(`  export DATABASE_URL=postgres://postgres:${read("postgres_password")}@127.0.0.1:5432/account_api`)
  say(`  export REDIS_URL=redis://account-api:${read("redis_app_password")}@127.0.0.1:6379`)
}
