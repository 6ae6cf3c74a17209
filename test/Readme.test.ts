import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { readFileSync } from "node:fs"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { runToEnd } from "./support/childEnvironment.js"
import { freePort, readyzAnswers, serviceEnvironment, startService } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"

const README = () => readFileSync(path.join(ROOT, "README.md"), "utf8")

/**
 * The README's walkthrough, run as a newcomer pastes it: every shell block from
 * "A first sign-in" to the settlement section, in order, in one bash with
 * `set -euo pipefail`, against a fresh service. The README cannot drift from
 * what the service does.
 */
const walkthrough = () => {
  const readme = README()
  const start = readme.indexOf("### A first sign-in")
  const end = readme.indexOf("### Settlement (session runners)")
  expect(start).toBeGreaterThan(-1)
  expect(end).toBeGreaterThan(start)
  const blocks = [...readme.slice(start, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] ?? "")
  return blocks
}

/**
 * How long each kind of step may take on a loaded machine, measured and then given room: an
 * `npm run --silent cli` step goes through npm and scripts/setup.mjs (install and build
 * checks, server pings) and starts the CLI: 3 s measured at a load average of 12 on two cores,
 * bounded at 10 s. A `curl` answers in milliseconds but for a sign-in's argon2id hash: 5 s. A
 * `json` field read is one `node -pe`: 0.1 s measured, 3 s. The API's start is bounded by
 * `readyzAnswers`' own limit.
 */
const STEP_BOUND_MS = { cli: 10_000, http: 5_000, json: 3_000 }
const API_START_BOUND_MS = 30_000

/** The walkthrough's time budget: its steps counted, each at its bound. */
const budgetOf = (script: string) => {
  const count = (pattern: RegExp) => script.match(pattern)?.length ?? 0
  const steps = { cli: count(/\bnpm run\b/g), http: count(/\bcurl\b/g), json: count(/\|\s*json\b/g) }
  return {
    steps,
    ms: steps.cli * STEP_BOUND_MS.cli + steps.http * STEP_BOUND_MS.http + steps.json * STEP_BOUND_MS.json
  }
}
const WALKTHROUGH_BUDGET = budgetOf(walkthrough().join("\n"))

/** Printed between the first block and the rest, so the first block's own output can be told apart. */
const FIRST_SIGN_IN_DONE = "--- the first sign-in block ended here ---"

/** The README opens as an entry point: what it is, the two commands, then a first sign-in. */
const OPENING_LINES = 40

layer(TestConfig(), { excludeTestServices: true, timeout: "180 seconds" })("the README (D11)", (it) => {
  describe("the opening", () => {
    it("says what it is, then the two commands and a first sign-in, within its first lines", () => {
      const opening = README().split("\n").slice(0, OPENING_LINES).join("\n")
      expect(opening).toMatch(/^# Account API\n/)
      expect(opening).toContain("## Two commands")
      expect(opening).toContain("npm start")
      expect(opening).toContain("npm test")
      expect(opening).toContain("### A first sign-in")
      expect(opening).toContain("/auth/login")
      expect(opening).toContain("/auth/me")
      // The CLI and the service must agree on the database: the opening says so.
      expect(opening).toContain("DATABASE_URL")
    })

    it("keeps build internals, the settings and the benchmark history in their own pages", () => {
      const readme = README()
      expect(readme).not.toContain("| `DATABASE_POOL_SIZE` |")
      expect(readme).not.toContain("What limits the targets that are not met")
      expect(readme).not.toContain("[setup] linting")
      expect(readme.split("\n").length).toBeLessThan(1_100)
    })
  })

  describe("the walkthrough", () => {
    it.scoped(
      "runs as pasted against a fresh service: every command succeeds and no answer is a problem",
      () =>
        Effect.gen(function*() {
          const blocks = walkthrough()
          expect(blocks.length).toBeGreaterThanOrEqual(5)
          // The budget counts what the walkthrough waits for; a walkthrough without steps would be no test.
          expect(WALKTHROUGH_BUDGET.steps.cli).toBeGreaterThan(5)
          expect(WALKTHROUGH_BUDGET.steps.http).toBeGreaterThan(5)
          const config = yield* AppConfig
          const port = yield* freePort
          const environment = serviceEnvironment(config, config.redisPrefix, { PORT: String(port) })
          const api = yield* startService("api", environment)
          yield* readyzAnswers(port, api)
          const [first, ...rest] = blocks
          const script = [first, `echo '${FIRST_SIGN_IN_DONE}'`, ...rest].join("\n").replace(
            "API=http://localhost:8080",
            `API=http://127.0.0.1:${port}`
          )
          expect(script).toContain(`API=http://127.0.0.1:${port}`)
          const run = yield* Effect.promise(() =>
            runToEnd("bash", ["-euo", "pipefail", "-c", script], {
              cwd: ROOT,
              timeout: WALKTHROUGH_BUDGET.ms,
              env: { ...environment, DATABASE_URL: Redacted.value(config.databaseUrl) }
            })
          )
          expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0)
          const output = run.stdout
          expect(output, output).not.toContain(`"type":"about:blank"`)
          // The first block alone reaches a signed-in /auth/me, before anything later in the README runs.
          const firstOutput = output.slice(0, output.indexOf(FIRST_SIGN_IN_DONE))
          expect(output).toContain(FIRST_SIGN_IN_DONE)
          expect(firstOutput).toMatch(/"user":\{"id":"[^"]+","email":"ada@example.com"/)
          expect(firstOutput).toMatch(/"account":\{"kind":"client"/)
          expect(output).toMatch(/"secret":"whsec_/)
          expect(output).toContain(`"deliveries":[]`)
          expect(output).toContain(`"applied":[]`)
          expect(output).toMatch(/"account":\{"kind":"client"/)
          expect(output).toContain(`"scope":"account"`)
          expect(output).toMatch(/"override":\{"scope":"repository"/)
          expect(output.toLowerCase()).toContain("idempotent-replayed: true")
          expect(output).toMatch(/"entries":\[\{"id"/)
          expect(output).toMatch(/"version":1,"timezone":"UTC","limits":\[\{"id"/)
          expect(output).toContain(`"group_by":"repository"`)
          expect(output).toMatch(/"events":\[\{"id":"[^"]+","type":"wallet\.budget_set"/)
          expect(output).toMatch(/^event: wallet\.credit_added$/m)
        }),
      API_START_BOUND_MS + WALKTHROUGH_BUDGET.ms
    )
  })
})

/**
 * What the README shows of the service's output, against what the service writes: the ledger
 * export's header, and each CLI command's printed shape (its `# {…}` comment) against the CLI run.
 */
const cliLines = () => README().split("\n").filter((line) => /^(echo .* \| )?npm run --silent cli -- .*# \{/.test(line))

/** A comment's shape, `{"orgs":[{"id","name"}]}` or `{"wallets":N}`, as JSON: bare keys and `N` given a placeholder. */
const shapeOf = (comment: string): unknown =>
  JSON.parse(comment.replace(/"([a-z_]+)"(?=[,}])/g, "\"$1\":0").replace(/:N\b/g, ":0"))

/** The keys of a value, nested, arrays by their first element: what a shape comment can say. */
const keysOf = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.length === 0 ? [] : [keysOf(value[0])]
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, keysOf(inner)]).sort())
  }
  return 0
}

layer(TestConfig(), { excludeTestServices: true, timeout: "300 seconds" })("what the README shows (D10, D13)", (it) => {
  it("the ledger export's header is the header the service writes", async () => {
    const { CSV_HEADER } = await import("../src/Wallets/Csv.js")
    const shown = /ledger\.csv\?from=&to=` \| [^|]*?header `([^`]+)`/.exec(README())?.[1]
    expect(shown).toBe(CSV_HEADER.trim())
  })

  it.effect("each CLI command's printed shape is what the CLI prints", () =>
    Effect.gen(function*() {
      const config = yield* AppConfig
      const env = { DATABASE_URL: Redacted.value(config.databaseUrl), LOG_LEVEL: "warning" }
      /** One line as pasted, in bash, with the organisation for `$ORG_ID`: its JSON. */
      const run = (command: string) =>
        Effect.promise(() => runToEnd("bash", ["-c", command], { cwd: ROOT, env, timeout: 120_000 }))
      const cli = (line: string, org: string) =>
        Effect.gen(function*() {
          const command = (line.split(" # ")[0] ?? "").replaceAll("\"$ORG_ID\"", org)
          const result = yield* run(command)
          expect(result.status, `${command}\n${result.stderr}`).toBe(0)
          return JSON.parse(result.stdout) as unknown
        })
      const lines = cliLines()
      expect(lines.map((line) => /cli -- (\w+ [\w-]+|migrate)/.exec(line)?.[1])).toEqual(
        expect.arrayContaining(["org create", "repo create", "org list", "user list", "repo list", "migrate"])
      )
      // Migrated first, as npm start does; an organisation with a member and a repository to list.
      const migrate = lines.find((line) => line.includes("cli -- migrate")) ?? ""
      yield* cli(migrate, "")
      const created = (yield* cli(lines.find((line) => line.includes("org create")) ?? "", "")) as { id: string }
      const org = `"${created.id}"`
      yield* run(
        `echo 'a long passphrase' | npm run --silent cli -- user create --email readme-${created.id}@example.com ` +
          `--name Ada --org ${org}`
      )
      for (const line of lines.filter((text) => !text.includes("cli -- migrate"))) {
        const comment = /# (\{.*\})/.exec(line)?.[1] ?? ""
        expect(keysOf(yield* cli(line, org)), line).toEqual(keysOf(shapeOf(comment)))
      }
    }), 300_000)
})
