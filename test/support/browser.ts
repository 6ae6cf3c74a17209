import * as HttpServer from "@effect/platform/HttpServer"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { chromium } from "playwright-core"

/** Debian's `chromium` package; `scripts/ci-prerequisites.sh` installs it where it can. */
const CHROMIUM = "/usr/bin/chromium"
export const hasChromium = existsSync(CHROMIUM)
if (!hasChromium) {
  console.warn(
    `Skipping the browser tests: ${CHROMIUM} is absent. ` +
      "Install Debian's chromium package (bash scripts/ci-prerequisites.sh does, as root) to run them."
  )
}

/** The server's address as the browser reaches it: the test server listens on a random local port. */
export const baseUrl = Effect.map(HttpServer.HttpServer, (server) =>
  server.address._tag === "TcpAddress"
    ? `http://127.0.0.1:${server.address.port}`
    : `http://unix:${server.address.path}`)

export const launchChromium = Effect.acquireRelease(
  Effect.promise(() =>
    chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
  ),
  (browser) => Effect.promise(() => browser.close())
)
