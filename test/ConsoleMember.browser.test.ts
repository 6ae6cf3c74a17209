import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { axeViolations, ConsoleTestApp, openPage, organisation, signInThroughPage } from "./support/console.js"
import { call } from "./support/TestApp.js"

/**
 * The console (D20) as an account's member uses it, in Chromium: signed in through its own
 * form, the wallet first, the pages every member has.
 */
describe.skipIf(!hasChromium)("the console for every member (D20)", () => {
  layer(ConsoleTestApp(), { excludeTestServices: true, timeout: "120 seconds" })("Chromium", (it) => {
    it.scoped(
      "a member signs in and sees the wallet, available_usd first, with no accessibility violation",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const budget = yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "1234.5", idempotency_key: "console-first-budget" }
          })
          expect(budget.status).toBe(200)
          const browser = yield* launchChromium
          const { page, pageErrors, offOrigin } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)

          const figures = yield* Effect.promise(() => page.locator(".wallet dt").allInnerTexts())
          expect(figures[0]).toBe("Available")
          expect(yield* Effect.promise(() => page.locator("[data-field=available_usd]").innerText())).toBe("$1,234.50")
          expect(yield* Effect.promise(() => page.locator("[data-field=enforced]").innerText())).toMatch(/^Enforced/)
          // The token is this tab's alone.
          const stored = yield* Effect.promise(() =>
            page.evaluate<[number, number]>("[sessionStorage.length, localStorage.length]")
          )
          expect(stored).toEqual([1, 0])
          // A member has no Settings.
          expect(yield* Effect.promise(() => page.getByRole("navigation").innerText())).not.toContain("Settings")

          expect(yield* axeViolations(page)).toEqual([])
          expect(pageErrors).toEqual([])
          expect(offOrigin).toEqual([])
        }),
      90_000
    )
  })
})
