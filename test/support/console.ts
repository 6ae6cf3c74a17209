import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import type { Browser, Page } from "playwright-core"
import { Accounts } from "../../src/Accounts.js"
import { Credentials } from "../../src/Auth/Credentials.js"
import { serveOn } from "../../src/Http.js"
import { Redis } from "../../src/Redis.js"
import { Settlement } from "../../src/Settlement.js"
import { SettlementMetrics } from "../../src/Settlement/Metrics.js"
import { SettlementQueue } from "../../src/Settlement/Queue.js"
import { SettlementWorkerLive } from "../../src/Settlement/Worker.js"
import { DatabaseLive } from "../../src/Sql.js"
import { Wallets } from "../../src/Wallets.js"
import { createOrganisation } from "./policies.js"
import { createUser, PASSWORD, signIn, TestConfig } from "./TestApp.js"

/**
 * The console's browser tests (test/Console*.browser.test.ts): the API on a random local port
 * with the settlement worker running in the same process (so jobs a test sends through plain
 * BullMQ are settled as `npm start`'s worker settles them), an organisation with an
 * administrator and a member, a page signed in through the console's own form, and axe-core.
 */
export const ConsoleTestApp = (overrides: Record<string, string> = {}) =>
  serveOn(NodeHttpServer.layerTest).pipe(
    Layer.provideMerge(
      SettlementWorkerLive.pipe(
        Layer.provideMerge(Layer.mergeAll(SettlementQueue.Default, Settlement.Default, SettlementMetrics.Default))
      )
    ),
    Layer.provideMerge(Layer.mergeAll(Accounts.Default, Credentials.Default, Redis.Default, Wallets.Default)),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(TestConfig(overrides))
  )

/** An organisation's account with an administrator and a member, each signed in over HTTP too. */
export const organisation = Effect.gen(function*() {
  const organisationId = yield* createOrganisation("Console Co")
  const admin = yield* createUser({ admin: true, organisationId })
  const member = yield* createUser({ organisationId })
  return {
    organisationId,
    admin: { ...admin, token: yield* signIn(admin.email) },
    member: { ...member, token: yield* signIn(member.email) }
  }
})

export const DESKTOP = { width: 1280, height: 800 } as const
export const PHONE = { width: 375, height: 740 } as const

/**
 * A fresh context and page (its own sessionStorage) reaching only the test's server: anything
 * else is refused, so the console is seen to need no other origin. Errors the page logs are kept
 * (`pageErrors`) for tests to assert there were none.
 */
export const openPage = (
  browser: Browser,
  base: string,
  viewport: { width: number; height: number } = DESKTOP,
  /** The browser's time zone (an IANA name), where a test needs one other than the machine's. */
  timezoneId?: string
) =>
  Effect.gen(function*() {
    const context = yield* Effect.acquireRelease(
      Effect.promise(() => browser.newContext({ viewport, ...(timezoneId === undefined ? {} : { timezoneId }) })),
      (context) => Effect.promise(() => context.close())
    )
    const offOrigin: Array<string> = []
    yield* Effect.promise(() =>
      context.route((url) => !url.href.startsWith(base), (route) => {
        offOrigin.push(route.request().url())
        return route.abort("blockedbyclient")
      })
    )
    const page = yield* Effect.promise(() => context.newPage())
    const pageErrors: Array<string> = []
    page.on("pageerror", (error) => pageErrors.push(error.message))
    return { context, page, pageErrors, offOrigin }
  })

/** Opens `/console` and signs in through its form, as a person does; resolves once the overview shows. */
export const signInThroughPage = (page: Page, base: string, email: string, password = PASSWORD) =>
  Effect.promise(async () => {
    await page.goto(`${base}/console`)
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill(password)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor({ timeout: 15_000 })
  })

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

export interface AxeViolation {
  readonly id: string
  readonly impact: string
  readonly help: string
  readonly targets: ReadonlyArray<string>
}

/**
 * axe-core's serious and critical violations on the page as it is now (WCAG 2.x A and AA rules).
 * The console's CSP refuses inline scripts, so axe is not added as a script tag: its source is
 * evaluated through Playwright's `evaluate` (the DevTools protocol), which the page's CSP does
 * not govern, leaving the CSP itself in force for the test.
 */
export const axeViolations = (page: Page) =>
  Effect.promise(async () => {
    await page.evaluate(AXE_SOURCE)
    return page.evaluate<ReadonlyArray<AxeViolation>>(`(async () => {
      const results = await window.axe.run(document, {
        runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"] }
      })
      return results.violations
        .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
        .map((violation) => ({
          id: violation.id,
          impact: violation.impact,
          help: violation.help,
          targets: violation.nodes.map((node) => node.target.join(" "))
        }))
    })()`)
  })
