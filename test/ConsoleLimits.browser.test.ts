import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { axeViolations, ConsoleTestApp, openPage, organisation, signInThroughPage } from "./support/console.js"
import { call } from "./support/TestApp.js"

/**
 * The console's limits where people live (D20, D22) in Chromium against the real API: an
 * administrator sets the account's zone and a limit for each user, whose reset is said in that
 * zone; a member reads what applies to them and asks for more; the administrator approves it for
 * less; the member sees it approved. axe-core checks each page on the way.
 */

const open = (page: Page, path: string, heading: string) =>
  Effect.promise(async () => {
    await page.getByRole("navigation").getByRole("link", { name: heading, exact: true }).click()
    await page.waitForURL(`**/console#/${path}`)
    await page.getByRole("heading", { level: 1, name: heading }).waitFor()
  })

const text = (page: Page, selector: string) => Effect.promise(() => page.locator(selector).innerText())

describe.skipIf(!hasChromium)("the console's limits in the account's zone, and raise requests (D22)", () => {
  layer(ConsoleTestApp(), { excludeTestServices: true, timeout: "120 seconds" })("Chromium", (it) => {
    it.scoped(
      "the zone and an each-user limit; what applies to a member; a raise asked, approved for less, seen approved",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const budget = yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "100", idempotency_key: "limits-budget" }
          })
          expect(budget.status).toBe(200)
          const browser = yield* launchChromium
          const admin = yield* openPage(browser, base)
          const member = yield* openPage(browser, base)
          const violations: Record<string, unknown> = {}
          const check = (name: string, page: Page) =>
            Effect.gen(function*() {
              const found = yield* axeViolations(page)
              if (found.length > 0) violations[name] = found
            })

          // The administrator sets the zone.
          yield* signInThroughPage(admin.page, base, org.admin.email)
          yield* open(admin.page, "timezone", "Time zone")
          yield* Effect.promise(async () => {
            await admin.page.getByLabel("Time zone").selectOption("Europe/Berlin")
            await admin.page.getByLabel("Weeks start on").selectOption("monday")
            await admin.page.getByRole("button", { name: "Save the time zone" }).click()
            await admin.page.getByText("Saved (version 1): Europe/Berlin, weeks from Monday.").waitFor()
          })
          expect(yield* text(admin.page, "[data-field=settings]")).toContain("Europe/Berlin")
          yield* check("time zone", admin.page)
          const settings = yield* call("GET", "/developer/account/settings", { token: org.member.token })
          expect(settings.body).toMatchObject({ timezone: "Europe/Berlin", week_start: "monday", version: 1 })

          // ... and a limit of $5 a day for each user, reset at Berlin's midnight. A rolling window of 4
          // minutes beside it is refused at its field (422 at #/limits/1/window_minutes).
          yield* open(admin.page, "limits", "Limits")
          const limitRow = (n: number) => admin.page.getByRole("group", { name: `Limit ${n}`, exact: true })
          yield* Effect.promise(async () => {
            await admin.page.getByRole("button", { name: "Add a limit" }).click()
            await limitRow(1).getByLabel("Scope").selectOption("each_user")
            await limitRow(1).getByLabel("Period").selectOption("day")
            await limitRow(1).getByLabel("Amount (USD)").fill("5")
            await admin.page.getByRole("button", { name: "Add a limit" }).click()
            await limitRow(2).getByLabel("Scope").selectOption("each_label")
            await limitRow(2).getByLabel("Label key").fill("team")
            await limitRow(2).getByLabel("Period").selectOption("rolling")
            await limitRow(2).getByLabel("Window (minutes)").fill("4")
            await limitRow(2).getByLabel("Amount (USD)").fill("1")
            await admin.page.getByRole("button", { name: "Save the limits" }).click()
            await limitRow(2).locator(".field-error").waitFor()
          })
          expect(
            yield* Effect.promise(() =>
              admin.page.locator("[aria-invalid=true]").evaluateAll((inputs) => inputs.map((input) => input.id))
            )
          ).toEqual([expect.stringMatching(/-window$/)])
          yield* Effect.promise(async () => {
            await limitRow(2).getByRole("button", { name: "Remove limit 2" }).click()
            await admin.page.getByRole("button", { name: "Save the limits" }).click()
            await admin.page.getByText("Limits saved (version 1).").waitFor()
          })
          const use = admin.page.getByRole("region", { name: "Version 1" })
          yield* Effect.promise(() => use.getByText("resets at midnight, Europe/Berlin").waitFor())
          expect(yield* Effect.promise(() => use.innerText())).toMatch(/per member/)
          yield* check("limits (administrator)", admin.page)

          // The member reads what applies to them: $5.00 left today, a session of up to $5.00 now.
          yield* signInThroughPage(member.page, base, org.member.email)
          yield* open(member.page, "limits", "Limits")
          const mine = member.page.getByRole("region", { name: "The limits a session of yours is judged by now" })
          yield* Effect.promise(() => mine.getByText("resets at midnight, Europe/Berlin").waitFor())
          const row = (yield* Effect.promise(() => mine.getByRole("row").nth(1).innerText())).replace(/\s+/g, " ")
          expect(row).toContain("as each user: you")
          expect(row).toContain("$0.00 of $5.00")
          expect(row).toContain("$5.00")
          expect(yield* text(member.page, "[data-field=max_reservable]")).toBe(
            "You can start a session of up to $5.00 now."
          )
          expect(yield* text(member.page, "[data-field=funds]")).toBe(
            "The wallet has $100.00 available for sessions."
          )
          yield* check("limits (member)", member.page)

          // The member asks for $8.00.
          yield* Effect.promise(async () => {
            await member.page.getByRole("button", { name: /^Request more for each user's limit per day/ }).click()
            await member.page.getByRole("dialog", { name: "Request more" }).waitFor()
          })
          yield* check("request more", member.page)
          yield* Effect.promise(async () => {
            const dialog = member.page.getByRole("dialog", { name: "Request more" })
            await dialog.getByLabel("Raise to (USD)").fill("8")
            await dialog.getByLabel("Why").fill("The nightly builds run long this week")
            await dialog.getByRole("button", { name: "Send the request" }).click()
            await member.page.getByText("Asked for $8.00: pending").waitFor()
          })
          const yours = member.page.getByRole("list", { name: "Your raise requests, newest first" })
          expect(yield* Effect.promise(() => yours.innerText())).toMatch(
            /^Pending: each user's limit per day to \$8\.00 until .*, because "The nightly builds run long this week"\. Waiting for an administrator\.$/
          )

          // The administrator sees it (the page follows the event stream), and approves it for $7.00.
          const toDecide = admin.page.getByRole("list", { name: "Raise requests to decide, newest first" })
          yield* Effect.promise(() => toDecide.getByText("The nightly builds run long this week").waitFor())
          yield* check("raise requests to decide", admin.page)
          yield* Effect.promise(async () => {
            await toDecide.getByLabel("Approve for (USD)").fill("7")
            await toDecide.getByRole("button", { name: "Approve" }).click()
            await admin.page.getByText("No request is waiting.").waitFor()
          })
          const limits = yield* call("GET", "/developer/account/limits", { token: org.admin.token })
          expect((limits.body as { limits: ReadonlyArray<{ effective_amount_usd: string }> }).limits).toEqual([
            expect.objectContaining({ scope: "each_user", effective_amount_usd: "7.000000" })
          ])

          // Each user's use, member by member (one effective read each).
          yield* Effect.promise(async () => {
            await admin.page.getByRole("button", { name: "Show each member's use" }).click()
            await admin.page.getByRole("region", { name: "Use of each user's limits, member by member" }).waitFor()
          })
          const perMember = yield* Effect.promise(() =>
            admin.page.getByRole("region", { name: "Use of each user's limits, member by member" }).getByRole("row")
              .allInnerTexts()
          )
          // A header row, then the account's two members: the raise approved applies to each.
          expect(perMember.slice(1).map((line) => line.replace(/\s+/g, " ").trim())).toEqual([
            expect.stringMatching(/ \$0\.00 used, \$7\.00 left$/),
            expect.stringMatching(/ \$0\.00 used, \$7\.00 left$/)
          ])

          // The member sees it approved, and the raised limit in what applies to them.
          yield* Effect.promise(() => yours.getByText("Approved", { exact: true }).waitFor())
          expect(yield* Effect.promise(() => yours.innerText())).toMatch(
            /^Approved: each user's limit per day to \$8\.00 until .*\. Approved by .+: raised to \$7\.00 until .+\.$/
          )
          yield* Effect.promise(() => member.page.getByText("You can start a session of up to $7.00 now.").waitFor())
          yield* check("limits after the approval (member)", member.page)

          // The overview's events tell the settings and the decision as sentences.
          yield* open(admin.page, "overview", "Overview")
          yield* Effect.promise(async () => {
            await admin.page.locator("[data-type='settings.updated']").getByText(
              / set the time zone to Europe\/Berlin, weeks from Monday \(version 1\)$/
            ).waitFor()
            await admin.page.locator("[data-type='limit.raise_decided']").getByText(
              / approved a limit raise to \$7\.00 until /
            ).waitFor()
          })
          expect(violations).toEqual({})
          expect([...admin.pageErrors, ...member.pageErrors]).toEqual([])
          expect([...admin.offOrigin, ...member.offOrigin]).toEqual([])
        }),
      60_000
    )
  })
})
