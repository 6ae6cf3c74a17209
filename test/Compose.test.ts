import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import path from "node:path"
import { parse } from "yaml"
import { ROOT } from "../scripts/programs.mjs"

interface Service {
  readonly ports?: ReadonlyArray<string>
  readonly command?: ReadonlyArray<string>
  readonly volumes?: ReadonlyArray<string>
}

const compose = parse(readFileSync(path.join(ROOT, "docker-compose.yml"), "utf8")) as { services: Record<string, Service> }

describe("docker-compose.yml", () => {
  it("publishes PostgreSQL (trust auth) and Redis (no password) on this machine only", () => {
    for (const name of ["postgres", "redis"]) {
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
})
