import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { programCommand, ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { runToEnd } from "./support/childEnvironment.js"
import { call, PASSWORD, signIn, TestApp } from "./support/TestApp.js"

/** What one CLI call may take on a loaded machine: seconds each, so the tests making many say so. */
const CLI_CALL_LIMIT_MS = 60_000
/** A test of several calls, one after another. */
const CLI_TEST_LIMIT_MS = 180_000

/** The operator CLI as `npm run --silent cli --` runs it, on this file's database (D10). */
const cli = (args: ReadonlyArray<string>, stdin = "") =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const [file, programArgs, own] = programCommand("cli", { args: [...args] })
    return yield* Effect.promise(() =>
      runToEnd(file, programArgs, {
        cwd: ROOT,
        input: stdin,
        env: { ...own, DATABASE_URL: Redacted.value(config.databaseUrl), LOG_LEVEL: "warning" },
        timeout: CLI_CALL_LIMIT_MS
      })
    )
  })

const json = (stdout: string): Record<string, unknown> => JSON.parse(stdout) as Record<string, unknown>

layer(TestApp(), { excludeTestServices: true })("operator CLI", (it) => {
  describe("the dashboard role (D9)", () => {
    it.effect(
      "only the CLI makes an operator: create --operator, grant-operator and revoke-operator",
      () =>
        Effect.gen(function*() {
          const created = yield* cli(
            ["user", "create", "--email", "ops@example.com", "--name", "Ops", "--operator"],
            PASSWORD
          )
          expect(created.status, created.stderr).toBe(0)
          expect(json(created.stdout)).toMatchObject({ email: "ops@example.com" })
          const plain = yield* cli(
            ["user", "create", "--email", "plain@example.com", "--name", "Plain", "--admin"],
            PASSWORD
          )
          expect(plain.status, plain.stderr).toBe(0)

          const board = (token: string) =>
            Effect.map(call("GET", "/admin/queues/api/queues", { token }), (reply) => reply.status)
          expect(yield* board(yield* signIn("ops@example.com"))).toBe(200)
          expect(yield* board(yield* signIn("plain@example.com"))).toBe(403)

          const granted = yield* cli(["user", "grant-operator", "--email", "plain@example.com"])
          expect(granted.status, granted.stderr).toBe(0)
          expect(json(granted.stdout)).toEqual({ id: json(plain.stdout).id })
          expect(yield* board(yield* signIn("plain@example.com"))).toBe(200)

          const revoked = yield* cli(["user", "revoke-operator", "--email", "ops@example.com"])
          expect(revoked.status, revoked.stderr).toBe(0)
          expect(yield* board(yield* signIn("ops@example.com"))).toBe(403)
        }),
      CLI_TEST_LIMIT_MS
    )

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
      }), CLI_TEST_LIMIT_MS)
  })

  describe("what operators need (D10)", () => {
    it.effect(
      "every command has --help with a description, plain text when not on a terminal",
      () =>
        Effect.gen(function*() {
          const commands = [
            ["migrate"],
            ["org", "create"],
            ["org", "list"],
            ["user", "create"],
            ["user", "list"],
            ["user", "reset-password"],
            ["user", "disable"],
            ["user", "enable"],
            ["repo", "create"],
            ["repo", "list"]
          ]
          const helps = yield* Effect.forEach(commands, (command) => cli([...command, "--help"]), { concurrency: 4 })
          for (const [index, result] of helps.entries()) {
            const command = commands[index]?.join(" ")
            expect(result.status, command).toBe(0)
            expect(result.stdout, command).toContain("DESCRIPTION")
            expect(result.stdout, command).not.toContain("\u001b[")
            if (command === "user create" || command === "user reset-password") {
              expect(result.stdout, command).toContain("standard input")
            }
          }
        }),
      CLI_TEST_LIMIT_MS
    )

    it.effect("--help opens with the commands, not with the generic options", () =>
      Effect.gen(function*() {
        const help = yield* cli(["--help"])
        expect(help.status, help.stderr).toBe(0)
        const lines = help.stdout.split("\n")
        const commands = lines.indexOf("COMMANDS")
        expect(commands, help.stdout).toBeGreaterThan(0)
        // What comes before the list: the name, usage and description, a dozen lines.
        expect(commands).toBeLessThan(15)
        expect(help.stdout).not.toContain("--completions")
        expect(help.stdout).toContain("user create --email text --name text")
      }))

    it.effect(
      "org list, user list [--org] and repo list --account print what was created",
      () =>
        Effect.gen(function*() {
          const org = json((yield* cli(["org", "create", "--name", "Listed Org"])).stdout)
          const member = json(
            (yield* cli(
              ["user", "create", "--email", "Member@Example.com", "--name", "Member", "--org", String(org.id)],
              PASSWORD
            )).stdout
          )
          const loner = json(
            (yield* cli(["user", "create", "--email", "loner@example.com", "--name", "Loner"], PASSWORD)).stdout
          )
          const repo = json((yield* cli(["repo", "create", "--account", String(org.id), "--name", "infra"])).stdout)

          const orgs = json((yield* cli(["org", "list"])).stdout).orgs as Array<Record<string, unknown>>
          expect(orgs).toContainEqual({
            id: org.id,
            name: "Listed Org",
            created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/)
          })
          const all = json((yield* cli(["user", "list"])).stdout).users as Array<Record<string, unknown>>
          expect(all).toContainEqual({
            id: member.id,
            email: "member@example.com",
            name: "Member",
            is_admin: false,
            is_operator: false,
            org_id: org.id,
            disabled: false
          })
          expect(all.map((user) => user.id)).toContain(loner.id)
          const members = json((yield* cli(["user", "list", "--org", String(org.id)])).stdout).users as Array<
            Record<string, unknown>
          >
          expect(members.map((user) => user.id)).toEqual([member.id])
          const repositories = json((yield* cli(["repo", "list", "--account", String(org.id)])).stdout).repositories
          expect(repositories).toEqual([{ id: repo.id, name: "infra", created_at: expect.any(String) }])
          const unknown = yield* cli(["repo", "list", "--account", "0190d2c4-8e7a-7a4b-9c1d-2e3f4a5b6c7d"])
          expect(unknown.status).not.toBe(0)
          expect(unknown.stdout).toBe("")
        }),
      CLI_TEST_LIMIT_MS
    )

    it.effect(
      "user disable ends every session and refuses sign-in as a wrong password would; enable undoes it",
      () =>
        Effect.gen(function*() {
          yield* cli(["user", "create", "--email", "leaver@example.com", "--name", "Leaver"], PASSWORD)
          const token = yield* signIn("leaver@example.com")
          expect((yield* call("GET", "/auth/me", { token })).status).toBe(200)

          const disabled = yield* cli(["user", "disable", "--email", "LEAVER@example.com"])
          expect(disabled.status, disabled.stderr).toBe(0)
          expect((yield* call("GET", "/auth/me", { token })).status).toBe(401)
          const refused = yield* call("POST", "/auth/login", {
            body: { email: "leaver@example.com", password: PASSWORD }
          })
          expect(refused.status).toBe(401)
          expect(refused.body).toMatchObject({ code: "invalid_credentials" })
          const listed = json((yield* cli(["user", "list"])).stdout).users as Array<Record<string, unknown>>
          expect(listed.find((user) => user.email === "leaver@example.com")).toMatchObject({ disabled: true })

          expect((yield* cli(["user", "enable", "--email", "leaver@example.com"])).status).toBe(0)
          const again = yield* call("POST", "/auth/login", {
            body: { email: "leaver@example.com", password: PASSWORD }
          })
          expect(again.status).toBe(200)
          expect((yield* call("GET", "/auth/me", { token })).status).toBe(401)
        }),
      CLI_TEST_LIMIT_MS
    )
  })
})
