import { ConfigProvider, Effect, Layer } from "effect"
import type { TestProject } from "vitest/node"
import { AppConfig } from "../../src/Config.js"
import { migrate, SqlLive } from "../../src/Sql.js"
import { adminQuery, databaseUrl } from "./databases.js"

declare module "vitest" {
  export interface ProvidedContext {
    templateDatabase: string
  }
}

/**
 * Migrates one template database per run; every test file clones it
 * (CREATE DATABASE ... TEMPLATE), which is much faster than migrating each.
 * The name is unique per run, so concurrent runs never share one.
 */
export default async function setup(project: TestProject) {
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
