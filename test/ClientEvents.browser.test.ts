import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync } from "node:fs"
import { createServer, type Server } from "node:http"
import path from "node:path"
import { chromium } from "playwright-core"
import { Webhook } from "standardwebhooks"
import { ROOT } from "../scripts/programs.mjs"
import { childEnvironment } from "./support/childEnvironment.js"
import { freePort } from "./support/processes.js"
import { createUser, PASSWORD, TestApp } from "./support/TestApp.js"

/**
 * The client package in a browser (D17): `@account-api/client/web` bundled for the browser (the
 * bundler refuses any Node module), loaded by a page of another origin (CORS as D15), where it
 * signs in, holds the live stream resumed with Last-Event-ID while it writes, and verifies a
 * signed webhook delivery.
 */

/** Debian's `chromium` package; `scripts/ci-prerequisites.sh` installs it where it can. */
const CHROMIUM = "/usr/bin/chromium"
const hasChromium = existsSync(CHROMIUM)
if (!hasChromium) {
  console.warn(`Skipping the client's browser test: ${CHROMIUM} is absent.`)
}

/**
 * The page's origin, another than the API's: a server of the test's on loopback, as the API is
 * (Chromium keeps pages of other address spaces off loopback), on a port chosen before the API's
 * settings, which list it in CORS_ORIGINS.
 */
const PAGE_PORT = await Effect.runPromise(freePort)
const ORIGIN = `http://127.0.0.1:${PAGE_PORT}`

/** Serves the page and the bundle on PAGE_PORT until the scope closes. */
const servePage = (code: string) =>
  Effect.acquireRelease(
    Effect.async<Server>((resume) => {
      const server = createServer((request, response) => {
        if (request.url === "/client.js") {
          response.writeHead(200, { "content-type": "text/javascript" }).end(code)
        } else {
          response.writeHead(200, { "content-type": "text/html" }).end(
            "<!doctype html><script type=\"module\">" +
              "import * as client from \"/client.js\"; window.client = client; document.title = \"ready\"" +
              "</script>"
          )
        }
      })
      server.listen(PAGE_PORT, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.sync(() => {
        server.closeAllConnections()
        server.close()
      })
  )

const baseUrl = Effect.map(
  HttpServer.HttpServer,
  (server) => `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
)

/** The web entry bundled as a browser would load it: esbuild, for the browser platform. */
const bundle = Effect.async<{ readonly status: number | null; readonly code: string; readonly output: string }>(
  (resume) => {
    const child = execFile(
      path.join(ROOT, "node_modules/.bin/esbuild"),
      ["packages/client/src/web.ts", "--bundle", "--platform=browser", "--format=esm", "--log-level=warning"],
      { cwd: ROOT, env: childEnvironment(), encoding: "utf8", maxBuffer: 64 * 1024 * 1024, timeout: 60_000 },
      (error, stdout, stderr) =>
        resume(Effect.succeed({
          status: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          code: stdout,
          output: stderr
        }))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  }
)

const launchChromium = Effect.acquireRelease(
  Effect.promise(() =>
    chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    })
  ),
  (browser) => Effect.promise(() => browser.close())
)

/** Runs in the page: the module's exports are on `window.client` once the page loaded. */
const IN_PAGE = `(async ({ baseUrl, email, password, delivery }) => {
  const { AccountApiClient, verifyWebhook } = window.client
  const api = new AccountApiClient({ baseUrl })
  await api.login(email, password)
  const setBudget = async (budget_usd) => {
    const { version } = await api.getWallet()
    await api.setBudget({ budget_usd, expected_version: version })
  }
  await setBudget("10")
  const [first] = (await api.listEvents({ limit: 1 })).events
  const stop = new AbortController()
  const streamed = []
  const reading = (async () => {
    for await (const event of api.streamEvents({ lastEventId: first.id, signal: stop.signal })) {
      streamed.push(event)
      if (streamed.length === 3) break
    }
  })()
  for (const budget of ["20", "30", "40"]) await setBudget(budget)
  await reading
  const log = (await api.listEvents({ limit: 500 })).events
  const verified = verifyWebhook(delivery.secret, delivery.body, new Headers(delivery.headers))
  let refused = null
  try {
    verifyWebhook(delivery.secret, delivery.body.replace("}", " }"), new Headers(delivery.headers))
  } catch (error) {
    refused = error.reason
  }
  return { streamed, log, verified, refused }
})`

describe.skipIf(!hasChromium)("the client package in a browser", () => {
  layer(TestApp({ CORS_ORIGINS: ORIGIN }), { excludeTestServices: true, timeout: "120 seconds" })(
    "Chromium",
    (it) => {
      it.scoped("signs in from another origin, holds the live stream, and verifies a webhook delivery", () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const user = yield* createUser()
          const built = yield* bundle
          expect(built.status, built.output).toBe(0)
          const browser = yield* launchChromium
          const context = yield* Effect.promise(() => browser.newContext())
          yield* servePage(built.code)
          const page = yield* Effect.promise(() => context.newPage())
          const errors: Array<string> = []
          page.on("pageerror", (error) => errors.push(error.message))
          yield* Effect.promise(() => page.goto(`${ORIGIN}/`))
          yield* Effect.promise(() =>
            page.waitForFunction("document.title === 'ready'", undefined, { timeout: 30_000 })
          )

          // A delivery as D17 signs it, with the official package's sign.
          const secret = `whsec_${randomBytes(32).toString("base64")}`
          const id = "0190d2c4-8e7a-7a4b-9c1d-2e3f4a5b6c7d"
          const at = new Date()
          const body = JSON.stringify({
            type: "webhook_endpoint.disabled",
            timestamp: at.toISOString(),
            data: { endpoint: { id, url: "https://receiver.example/hooks" }, reason: "gone" }
          })
          const delivery = {
            secret,
            body,
            headers: {
              "webhook-id": id,
              "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
              "webhook-signature": new Webhook(secret).sign(id, at, body)
            }
          }
          const result = yield* Effect.promise(() =>
            page.evaluate(
              `${IN_PAGE}(${JSON.stringify({ baseUrl: base, email: user.email, password: PASSWORD, delivery })})`
            )
          )
          expect(errors).toEqual([])
          const { log, refused, streamed, verified } = result as {
            readonly streamed: ReadonlyArray<{ readonly id: string; readonly type: string }>
            readonly log: ReadonlyArray<{ readonly id: string; readonly type: string }>
            readonly verified: unknown
            readonly refused: unknown
          }
          expect(log.map((event) => event.type)).toEqual([
            "wallet.budget_set",
            "wallet.budget_set",
            "wallet.budget_set",
            "wallet.budget_set"
          ])
          expect(streamed).toEqual(log.slice(1))
          expect(verified).toEqual({
            id,
            type: "webhook_endpoint.disabled",
            timestamp: at.toISOString(),
            data: { endpoint: { id, url: "https://receiver.example/hooks" }, reason: "gone" }
          })
          expect(refused).toBe("invalid_signature")
        }))
    }
  )
})
