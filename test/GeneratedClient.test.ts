import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import path from "node:path"
import openapiTS, { astToString } from "openapi-typescript"
import ts from "typescript"
import { ROOT } from "../scripts/programs.mjs"
import { childEnvironment } from "./support/childEnvironment.js"
import { call, createUser, PASSWORD, TestApp } from "./support/TestApp.js"

/**
 * The OpenAPI document as a client generator uses it (D9): types generated
 * from /openapi.json by openapi-typescript, a small client on openapi-fetch
 * that signs in and reads the wallet and the ledger, type-checked strictly
 * and then run against the service.
 */

const CLIENT = `import createClient from "openapi-fetch"
import type { paths } from "./schema.js"

const [baseUrl = "", email = "", password = ""] = process.argv.slice(2)
const client = createClient<paths>({ baseUrl })

const login = await client.POST("/auth/login", { body: { email, password } })
if (login.data === undefined) throw new Error(\`sign-in failed: \${JSON.stringify(login.error)}\`)
const token: string = login.data.access_token
const headers = { authorization: \`Bearer \${token}\` }

const wallet = await client.GET("/developer/account/wallet", { headers })
const budget: string | undefined = wallet.data?.budget_usd
const ledger = await client.GET("/developer/account/wallet/ledger", { headers, params: { query: { limit: 5 } } })
const entries: number | undefined = ledger.data?.entries.length
const unauthenticated = await client.GET("/developer/account/wallet", {})
const code: string | undefined = unauthenticated.error?.code

console.log(JSON.stringify({ email: login.data.user.email, budget, entries, code }))
`

const OUT = path.join(ROOT, "test", "artifacts", "openapi-client")

layer(TestApp(), { excludeTestServices: true, timeout: "120 seconds" })("a generated client (D9)", (it) => {
  describe("openapi-typescript and openapi-fetch", () => {
    it.effect("types generated from /openapi.json type-check a client that talks to the service", () =>
      Effect.gen(function*() {
        const document = (yield* call("GET", "/openapi.json")).body as Parameters<typeof openapiTS>[0]
        const schema = astToString(yield* Effect.promise(() => openapiTS(document)))
        mkdirSync(OUT, { recursive: true })
        writeFileSync(path.join(OUT, "schema.d.ts"), schema)
        writeFileSync(path.join(OUT, "client.ts"), CLIENT)

        const program = ts.createProgram([path.join(OUT, "client.ts")], {
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          noEmit: true,
          skipLibCheck: true,
          target: ts.ScriptTarget.ES2022,
          module: ts.ModuleKind.NodeNext,
          moduleResolution: ts.ModuleResolutionKind.NodeNext
        })
        const diagnostics = ts.getPreEmitDiagnostics(program).map((diagnostic) =>
          ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")
        )
        expect(diagnostics).toEqual([])

        const server = yield* HttpServer.HttpServer
        const port = server.address._tag === "TcpAddress" ? server.address.port : 0
        const user = yield* createUser()
        // Not spawnSync: the service answers from this very process.
        const run = yield* Effect.promise(() =>
          new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve) => {
            execFile(
              process.execPath,
              ["--import", "tsx", path.join(OUT, "client.ts"), `http://127.0.0.1:${port}`, user.email, PASSWORD],
              { cwd: ROOT, env: childEnvironment(), encoding: "utf8", timeout: 60_000 },
              (error, stdout, stderr) =>
                resolve({
                  code: error === null ? 0 : typeof error.code === "number" ? error.code : null,
                  stdout,
                  stderr
                })
            )
          })
        )
        expect(run.code, run.stderr).toBe(0)
        expect(JSON.parse(run.stdout)).toEqual({
          email: user.email,
          budget: "0.000000",
          entries: 0,
          code: "unauthenticated"
        })
      }))

    it.effect("the document names its version, a server, every operation, and the headers answers carry", () =>
      Effect.gen(function*() {
        const document = (yield* call("GET", "/openapi.json")).body as {
          info: { version: string }
          servers: Array<{ url: string }>
          paths: Record<
            string,
            Record<
              string,
              {
                summary?: string
                responses: Record<string, { headers?: Record<string, unknown>; description: string }>
                parameters?: Array<{ name: string; schema: { type: string } }>
              }
            >
          >
          components: { schemas: Record<string, unknown> }
        }
        const pkg = JSON.parse(
          yield* Effect.promise(() =>
            import("node:fs/promises").then((fs) => fs.readFile(path.join(ROOT, "package.json"), "utf8"))
          )
        ) as { version: string }
        expect(document.info.version).toBe(pkg.version)
        expect(document.servers.length).toBeGreaterThan(0)
        for (const [route, operations] of Object.entries(document.paths)) {
          for (const [method, operation] of Object.entries(operations)) {
            expect(operation.summary, `${method} ${route}`).toBeTruthy()
            for (const response of Object.values(operation.responses)) {
              expect(response.headers).toHaveProperty("X-Request-Id")
            }
          }
        }
        const setBudget = document.paths["/developer/account/wallet"]?.put
        expect(setBudget?.responses["200"]?.headers).toHaveProperty("Idempotent-Replayed")
        expect(setBudget?.responses["409"]?.description).toContain(
          "version_conflict, budget_below_committed, idempotency_in_progress"
        )
        expect(setBudget?.responses["409"]?.headers).toHaveProperty("Retry-After")
        expect(setBudget?.responses["401"]?.headers).toHaveProperty("WWW-Authenticate")
        const limit = document.paths["/developer/account/wallet/ledger"]?.get?.parameters?.find((parameter) =>
          parameter.name === "limit"
        )
        expect(limit?.schema.type).toBe("integer")
        const text = JSON.stringify(document)
        expect(text).not.toContain("globally shared symbol")
        expect(text).not.toContain(`"#/components/schemas/Int"`)
        expect(text).not.toContain("decoded into a DateTime")
        expect(document.components.schemas).toHaveProperty("Usd.examples")
      }))
  })
})
