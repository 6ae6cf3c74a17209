import { ConfigProvider, Effect, Layer } from "effect"
import type { TestProject } from "vitest/node"
import { ensureBuilt } from "../../scripts/programs.mjs"
import { AppConfig } from "../../src/Config.js"
import { migrate, SqlLive } from "../../src/Sql.js"
import { adminQuery, adminRows, databaseUrl } from "./databases.js"

declare module "vitest" {
  export interface ProvidedContext {
    templateDatabase: string
  }
}

/**
 * Compiles the programs when their sources changed: a direct `npx vitest` has
 * not been through `npm test`'s set-up, and the tests that run real processes
 * run the compiled programs, as `npm start` does. Migrates one template
 * database per run; every test file clones it
 * (CREATE DATABASE ... TEMPLATE), which is much faster than migrating each.
 * The name is unique per run, so concurrent runs never share one.
 */
export default async function setup(project: TestProject) {
  ensureBuilt((message) => process.stderr.write(`[test setup] ${message}\n`))
  await dropOrphans()
  const template = `account_api_tpl_${process.pid}_${Date.now().toString(36)}`
  await adminQuery(`CREATE DATABASE "${template}"`)
  const config = AppConfig.Default.pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["DATABASE_URL", databaseUrl(template)]]))))
  )
  await Effect.runPromise(migrate.pipe(Effect.provide(SqlLive.pipe(Layer.provide(config)))))
  project.provide("templateDatabase", template)
  return async () => {
    await adminQuery(`DROP DATABASE IF EXISTS "${template}" WITH (FORCE)`)
  }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * Databases of earlier runs that were killed before their teardown: their
 * names carry the run's process id, so a dead id marks them as orphans.
 */
const dropOrphans = async () => {
  const names = await adminRows("SELECT datname FROM pg_database WHERE datname ~ '^account_api_(tpl|test)_[0-9]+_'")
  for (const name of names) {
    const pid = Number(name.split("_")[3])
    if (!isAlive(pid)) await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
  }
}
