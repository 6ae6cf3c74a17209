import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { spawnSync } from "node:child_process"
import { programCommand, ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { call, PASSWORD, signIn, TestApp } from "./support/TestApp.js"

/** The operator CLI as `npm run --silent cli --` runs it, on this file's database (D10). */
const cli = (args: ReadonlyArray<string>, stdin = "") =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const [file, programArgs] = programCommand("cli", { args: [...args] })
    const result = spawnSync(file, programArgs, {
      cwd: ROOT,
      input: stdin,
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", DATABASE_URL: Redacted.value(config.databaseUrl), LOG_LEVEL: "warning" }
    })
    return { status: result.status, stdout: result.stdout, stderr: result.stderr }
  })

const json = (stdout: string): Record<string, unknown> => JSON.parse(stdout) as Record<string, unknown>

layer(TestApp(), { excludeTestServices: true })("operator CLI", (it) => {
  describe("the dashboard role (D9)", () => {
    it.effect("only the CLI makes an operator: create --operator, grant-operator and revoke-operator", () =>
      Effect.gen(function*() {
        const created = yield* cli(["user", "create", "--email", "ops@example.com", "--name", "Ops", "--operator"], PASSWORD)
        expect(created.status, created.stderr).toBe(0)
        expect(json(created.stdout)).toMatchObject({ email: "ops@example.com" })
        const plain = yield* cli(["user", "create", "--email", "plain@example.com", "--name", "Plain", "--admin"], PASSWORD)
        expect(plain.status, plain.stderr).toBe(0)

        const board = (token: string) => Effect.map(call("GET", "/admin/queues/api/queues", { token }), (reply) => reply.status)
        expect(yield* board(yield* signIn("ops@example.com"))).toBe(200)
        expect(yield* board(yield* signIn("plain@example.com"))).toBe(403)

        const granted = yield* cli(["user", "grant-operator", "--email", "plain@example.com"])
        expect(granted.status, granted.stderr).toBe(0)
        expect(json(granted.stdout)).toEqual({ id: json(plain.stdout).id })
        expect(yield* board(yield* signIn("plain@example.com"))).toBe(200)

        const revoked = yield* cli(["user", "revoke-operator", "--email", "ops@example.com"])
        expect(revoked.status, revoked.stderr).toBe(0)
        expect(yield* board(yield* signIn("ops@example.com"))).toBe(403)
      }))

    it.effect("an unknown email fails with the reason on stderr and a non-zero exit", () =>
      Effect.gen(function*() {
        const result = yield* cli(["user", "grant-operator", "--email", "nobody@example.com"])
        expect(result.status).not.toBe(0)
        expect(result.stdout).toBe("")
        expect(result.stderr).toContain("no user with email nobody@example.com")
      }))

    it.effect("each command explains itself with --help", () =>
      Effect.gen(function*() {
        for (const command of ["grant-operator", "revoke-operator"]) {
          const result = yield* cli(["user", command, "--help"])
          expect(result.status, result.stderr).toBe(0)
          expect(result.stdout).toContain("queue dashboard")
        }
      }))
  })
})
