import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Decimal } from "decimal.js"
import { Effect, Redacted } from "effect"
import type { Page } from "playwright-core"
import { AppConfig } from "../src/Config.js"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { axeViolations, ConsoleTestApp, openPage, organisation, PHONE, signInThroughPage } from "./support/console.js"
import { createRepository } from "./support/policies.js"
import { plainRunner } from "./support/spendControls.js"
import { call } from "./support/TestApp.js"

/**
 * The console (D20) as an account's member uses it, in Chromium: signed in through its own
 * form; the wallet first; sessions sent through plain BullMQ appearing live; the spend chart
 * against the spend report; the ledger's notes as text under the CSP; a revoked sign-in and a
 * 503 as a person meets them; a phone's width; axe-core on every page.
 */

const goTo = (page: Page, title: string) =>
  Effect.promise(async () => {
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: title }).click()
    await page.getByRole("heading", { level: 1, name: title }).waitFor({ timeout: 15_000 })
  })

/** A runner of the account's, written with plain BullMQ under this file's queue prefix. */
const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

/** Sends one settlement job and fails the test unless the worker applied it. */
const settle = (send: Effect.Effect.Success<typeof runner>["send"], name: string, data: Record<string, string>) =>
  Effect.flatMap(send(name, data), (answer) => {
    expect(answer.failed).toBeUndefined()
    expect(answer.result).toMatchObject({ status: "applied" })
    return Effect.void
  })

/** The sum of decimal strings, exactly. */
const sum = (amounts: ReadonlyArray<string>) =>
  amounts.reduce((total, amount) => total.plus(amount === "" ? "0" : amount), new Decimal(0))

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
          const { offOrigin, page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)

          // The wallet shows with the sessions and the limits, read together (one render).
          yield* Effect.promise(() => page.locator(".wallet dt").first().waitFor())
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

    it.scoped(
      "the overview reads the ten newest events in one request, however many pages the log holds",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const sql = yield* SqlClient.SqlClient
          const budget = yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "10", idempotency_key: "console-newest-budget" }
          })
          expect(budget.status).toBe(200)
          // 600 copies of that event after it, as if appended one by one (the head row moved along),
          // so that the log is more than one page of 500; then a credit, the newest event.
          yield* sql`INSERT INTO account_events (account_kind, account_id, position, type, data)
            SELECT account_kind, account_id, position + n, type, data
            FROM account_events, generate_series(1, 600) AS n
            WHERE account_id = ${org.organisationId}`
          yield* sql`UPDATE account_event_heads SET last_position = last_position + 600
            WHERE account_id = ${org.organisationId}`
          const credit = yield* call("POST", "/developer/account/wallet/credits", {
            token: org.admin.token,
            body: { amount_usd: "1", idempotency_key: "console-newest-credit" }
          })
          expect(credit.status).toBe(200)

          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          const reads: Array<string> = []
          page.on("request", (request) => {
            const url = new URL(request.url())
            if (url.pathname.endsWith("/developer/account/events")) reads.push(url.search)
          })
          yield* signInThroughPage(page, base, org.member.email)
          const shown = page.locator("ol.events > li")
          yield* Effect.promise(() => shown.nth(9).waitFor({ timeout: 15_000 }))
          expect(yield* Effect.promise(() => shown.count())).toBe(10)
          expect(yield* Effect.promise(() => shown.first().getAttribute("data-type"))).toBe("wallet.credit_added")
          // Told as a sentence with its amounts (console/events.ts), not as the type and its fields.
          expect(yield* Effect.promise(() => shown.first().locator(".event-sentence").innerText())).toBe(
            "Credit of $1.00 added: $11.00 available"
          )
          expect(reads).toHaveLength(1)
          expect(Object.fromEntries(new URLSearchParams(reads[0]))).toEqual({ order: "newest", limit: "10" })
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "a session reserved through plain BullMQ shows on the overview within a second and leaves when released",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "50", idempotency_key: "console-live-budget" }
          })
          const { send } = yield* runner
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)
          const row = page.getByRole("row").filter({ hasText: "live-run-1" })
          yield* Effect.promise(() => page.getByText("No session is open.").waitFor())

          yield* settle(send, "reserve", {
            account_id: org.organisationId,
            session_id: "live-run-1",
            amount_usd: "2.5",
            idempotency_key: "live-run-1-reserve"
          })
          const reserved = performance.now()
          yield* Effect.promise(() => row.waitFor({ timeout: 10_000 }))
          const shownAfter = performance.now() - reserved
          expect(yield* Effect.promise(() => row.innerText())).toContain("$2.50")

          yield* settle(send, "release", {
            account_id: org.organisationId,
            session_id: "live-run-1",
            idempotency_key: "live-run-1-release"
          })
          const released = performance.now()
          yield* Effect.promise(() => row.waitFor({ state: "detached", timeout: 10_000 }))
          const goneAfter = performance.now() - released

          console.log(
            `open session shown after ${shownAfter.toFixed(0)} ms, gone ${goneAfter.toFixed(0)} ms after release`
          )
          expect(shownAfter).toBeLessThan(1_000)
          expect(goneAfter).toBeLessThan(1_000)
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "the spend chart's days add up to the spend report's totals, by repository and by user",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const [first, second] = [
            yield* createRepository(org.organisationId),
            yield* createRepository(org.organisationId)
          ]
          yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "100", idempotency_key: "console-spend-budget" }
          })
          const { send } = yield* runner
          const runs = [
            { session: "spend-a", repository: first, user: org.member.id, spends: ["1.25", "0.5"] },
            { session: "spend-b", repository: second, user: org.admin.id, spends: ["2.125"] },
            { session: "spend-c", repository: first, user: org.admin.id, spends: ["0.000001"] },
            { session: "spend-d", repository: undefined, user: undefined, spends: ["0.3"] }
          ]
          for (const run of runs) {
            yield* settle(send, "reserve", {
              account_id: org.organisationId,
              session_id: run.session,
              amount_usd: "5",
              idempotency_key: `${run.session}-reserve`,
              ...(run.repository === undefined ? {} : { repository_id: run.repository }),
              ...(run.user === undefined ? {} : { user_id: run.user })
            })
            for (const [index, amount] of run.spends.entries()) {
              yield* settle(send, "spend", {
                account_id: org.organisationId,
                session_id: run.session,
                amount_usd: amount,
                idempotency_key: `${run.session}-spend-${index}`
              })
            }
            yield* settle(send, "release", {
              account_id: org.organisationId,
              session_id: run.session,
              idempotency_key: `${run.session}-release`
            })
          }

          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)
          yield* goTo(page, "Spend")

          for (const groupBy of ["repository", "user"] as const) {
            yield* Effect.promise(async () => {
              await page.getByLabel("Group by").selectOption(groupBy)
              await page.getByRole("button", { name: "Show" }).click()
              await page.locator(`.chart-data caption`, { hasText: `by ${groupBy}` }).waitFor({ state: "attached" })
            })
            const report = yield* call("GET", `/developer/account/spend?group_by=${groupBy}`, {
              token: org.member.token
            })
            expect(report.status).toBe(200)
            const body = report.body as {
              groups: ReadonlyArray<{ key: string | null; spent_usd: string }>
              total: { spent_usd: string }
            }
            // The chart's data (the canvas's table, what Chart.js drew): each series' days, summed.
            const chart = yield* Effect.promise(() =>
              page.evaluate<ReadonlyArray<{ key: string; values: ReadonlyArray<string> }>>(`(() => {
              const table = document.querySelector(".chart-data")
              const keys = [...table.querySelectorAll("thead th[data-key]")].map((th) => th.dataset.key)
              const rows = [...table.querySelectorAll("tbody tr")]
              return keys.map((key, column) => ({
                key,
                values: rows.map((row) => row.querySelectorAll("td")[column].textContent)
              }))
            })()`)
            )
            const charted = Object.fromEntries(chart.map((series) => [series.key, sum(series.values).toFixed(6)]))
            const reported = Object.fromEntries(
              body.groups.map((group) => [group.key ?? "unattributed", new Decimal(group.spent_usd).toFixed(6)])
            )
            expect(charted).toEqual(reported)
            // Two repositories or users, and the session attributed to none.
            expect(Object.keys(reported).length).toBe(3)
            expect(sum(Object.values(charted)).toFixed(6)).toBe(new Decimal(body.total.spent_usd).toFixed(6))
            // The table beside the chart is the report's: its total row says the report's total.
            const totalRow = yield* Effect.promise(() =>
              page.locator(".card table").last().getByRole("row").last().innerText()
            )
            expect(totalRow).toContain("$4.175001")
          }
          expect(yield* axeViolations(page)).toEqual([])
          expect(pageErrors).toEqual([])
        }),
      120_000
    )

    it.scoped(
      "by model and by a label (D19), the chart names each in full and its days add up to the report's groups",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const wallet = yield* call("GET", "/developer/account/wallet", { token: org.member.token })
          const walletId = String((wallet.body as { id: string }).id)
          // The running totals as the settlement batch keeps them per model and labels, today and yesterday.
          const sql = yield* SqlClient.SqlClient
          yield* sql`
            INSERT INTO settlement_spend_totals (wallet_id, day, model, labels, spent_usd, sessions)
            VALUES
              (${walletId}, (now() AT TIME ZONE 'UTC')::date, 'claude-sonnet-4-5-20250929', '{"team":"search"}', 1.25, 1),
              (${walletId}, (now() AT TIME ZONE 'UTC')::date, 'gpt-4o-mini', '{"team":"ads"}', 0.5, 1),
              (${walletId}, (now() AT TIME ZONE 'UTC')::date, NULL, NULL, 0.25, 1),
              (${walletId}, (now() AT TIME ZONE 'UTC')::date - 1, 'gpt-4o-mini', '{"team":"search"}', 2, 1)`
            .pipe(Effect.orDie)
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)
          yield* goTo(page, "Spend")
          // Yesterday may lie in last month: the window is the two days, whatever the date.
          const from = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10)
          const to = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)
          for (const [grouping, key] of [["model", ""], ["label", "team"]] as const) {
            const groupBy = grouping === "label" ? `label:${key}` : grouping
            yield* Effect.promise(async () => {
              await page.getByLabel("Group by").selectOption(grouping)
              if (grouping === "label") await page.getByLabel("Label key").fill(key)
              await page.getByLabel("From (UTC day)").fill(from)
              await page.getByLabel("To (excluded)").fill(to)
              await page.getByRole("button", { name: "Show" }).click()
              await page.locator(`.chart-data caption`, { hasText: `by ${groupBy}` }).waitFor({ state: "attached" })
            })
            const report = yield* call("GET", `/developer/account/spend?group_by=${groupBy}&from=${from}&to=${to}`, {
              token: org.member.token
            })
            const body = report.body as { groups: ReadonlyArray<{ key: string | null; spent_usd: string }> }
            const chart = yield* Effect.promise(() =>
              page.evaluate<ReadonlyArray<{ key: string; name: string; values: ReadonlyArray<string> }>>(`(() => {
              const table = document.querySelector(".chart-data")
              const heads = [...table.querySelectorAll("thead th[data-key]")]
              const rows = [...table.querySelectorAll("tbody tr")]
              return heads.map((th, column) => ({
                key: th.dataset.key,
                name: th.textContent,
                values: rows.map((row) => row.querySelectorAll("td")[column].textContent)
              }))
            })()`)
            )
            const charted = Object.fromEntries(chart.map((series) => [series.key, sum(series.values).toFixed(6)]))
            const reported = Object.fromEntries(
              body.groups.map((group) => [group.key ?? "unattributed", new Decimal(group.spent_usd).toFixed(6)])
            )
            expect(charted, groupBy).toEqual(reported)
            // Names in full, not shortened as ids are; spending with none is "None".
            const names = chart.map((series) => series.name).sort()
            expect(names, groupBy).toEqual(
              grouping === "model" ? ["None", "claude-sonnet-4-5-20250929", "gpt-4o-mini"] : ["None", "ads", "search"]
            )
          }
          expect(yield* axeViolations(page)).toEqual([])
          expect(pageErrors).toEqual([])
        }),
      120_000
    )

    it.scoped(
      "a note holding a script or an onerror image shows as text on the ledger, and the CSP runs no inline script",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const note = "<script>window.__injected = 'script'</script><img src=x onerror=\"window.__injected = 'img'\">"
          const budget = yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "10", idempotency_key: "console-note-budget", note }
          })
          expect(budget.status).toBe(200)
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)
          yield* goTo(page, "Ledger")

          const cell = page.locator(".note").first()
          expect(yield* Effect.promise(() => cell.innerText())).toBe(note)
          expect(yield* Effect.promise(() => page.locator("main img, main script").count())).toBe(0)
          expect(yield* Effect.promise(() => page.evaluate("window.__injected"))).toBeUndefined()

          // Were markup ever to reach the page, the CSP would refuse to run it: an inline script
          // put into the document is blocked and reported, and the flag stays unset.
          const violation = yield* Effect.promise(() =>
            page.evaluate<string | null>(`new Promise((resolve) => {
            document.addEventListener("securitypolicyviolation", (event) => resolve(event.effectiveDirective), {
              once: true
            })
            // Ran, were there no CSP: no report comes, and the flag below is set.
            setTimeout(() => resolve(null), 2000)
            const script = document.createElement("script")
            script.textContent = "window.__injected = 'inline'"
            document.body.append(script)
          })`)
          )
          expect(violation).toBe("script-src-elem")
          expect(yield* Effect.promise(() => page.evaluate("window.__injected"))).toBeUndefined()
          expect(yield* axeViolations(page)).toEqual([])
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "a sign-in revoked while the page is open returns to sign-in with the reason, the token dropped",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const browser = yield* launchChromium
          const { page } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.member.email)
          // The tab's one stored item is its token.
          const token = yield* Effect.promise(() =>
            page.evaluate<string>("sessionStorage.getItem(sessionStorage.key(0))")
          )
          expect((yield* call("POST", "/auth/logout", { token })).status).toBe(204)

          // An idle overview reads nothing (the stream's notices tell it what moved): the next read,
          // here the ledger's, meets the 401.
          yield* Effect.promise(async () => {
            await page.evaluate(`window.location.hash = "#/ledger"`)
            await page.getByRole("heading", { name: "Sign in to the account console" }).waitFor()
          })
          expect(yield* Effect.promise(() => page.getByRole("status").innerText())).toMatch(/^Your sign-in ended: /)
          expect(yield* Effect.promise(() => page.evaluate("sessionStorage.length"))).toBe(0)
          expect(yield* axeViolations(page)).toEqual([])
        }),
      60_000
    )

    it.scoped(
      "a 503 shows that the service is away with \"Try again\", and the page recovers by itself",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const browser = yield* launchChromium
          const { page } = yield* openPage(browser, base)
          let refused = 0
          yield* Effect.promise(() =>
            page.route(`${base}/developer/account/wallet`, (route) => {
              if (refused++ > 0) return route.continue()
              return route.fulfill({
                status: 503,
                headers: { "retry-after": "1", "content-type": "application/problem+json" },
                body: JSON.stringify({
                  type: "about:blank",
                  title: "Service Unavailable",
                  status: 503,
                  code: "unavailable",
                  detail: "The service is temporarily unavailable; retry with backoff.",
                  retry_after_seconds: 1
                })
              })
            })
          )
          yield* signInThroughPage(page, base, org.member.email)
          const banner = page.getByRole("alert").filter({ hasText: "The service is unavailable for a moment." })
          yield* Effect.promise(() => banner.waitFor())
          expect(yield* Effect.promise(() => banner.getByRole("button", { name: "Try again" }).isVisible())).toBe(true)
          expect(yield* Effect.promise(() => banner.innerText())).toContain("Trying again in 1 s.")
          // The next read, a second later, is answered: the wallet shows and the banner goes.
          yield* Effect.promise(() => page.locator("[data-field=available_usd]").waitFor({ timeout: 10_000 }))
          expect(yield* Effect.promise(() => banner.count())).toBe(0)
          expect(refused).toBeGreaterThanOrEqual(2)
        }),
      60_000
    )

    it.scoped(
      "at 375 px wide every member page fits without sideways scrolling and the navigation works by keyboard",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base, PHONE)
          yield* signInThroughPage(page, base, org.member.email)
          const overflow = () =>
            Effect.promise(() => page.evaluate<number>("document.documentElement.scrollWidth - window.innerWidth"))

          for (const title of ["Overview", "Spend", "Ledger", "Sessions"]) {
            // From the top of the page, by keyboard alone: the skip link first, then the navigation.
            yield* Effect.promise(async () => {
              await page.locator("body").focus()
              await page.keyboard.press("Tab")
              const focused = () => page.evaluate<string>("document.activeElement?.textContent ?? \"\"")
              for (let presses = 0; presses < 12 && (await focused()) !== title; presses++) {
                await page.keyboard.press("Tab")
              }
              expect(await focused()).toBe(title)
              await page.keyboard.press("Enter")
              await page.getByRole("heading", { level: 1, name: title }).waitFor({ timeout: 15_000 })
            })
            expect(yield* overflow()).toBeLessThanOrEqual(0)
            // The page is laid out for the phone: the content takes the width (the navigation above
            // it, not beside it), and no control reaches past the screen's edge (a table's own box
            // scrolls sideways; the page does not).
            const layout = yield* Effect.promise(() =>
              page.evaluate<{ mainShare: number; cut: ReadonlyArray<string> }>(`(() => ({
              mainShare: document.querySelector("main").getBoundingClientRect().width / window.innerWidth,
              cut: [...document.querySelectorAll("a, button, input, select")]
                .filter((element) => element.checkVisibility() && !element.closest(".table-scroll"))
                .filter((element) => element.getBoundingClientRect().right > window.innerWidth)
                .map((element) => element.outerHTML.slice(0, 80))
            }))()`)
            )
            expect(layout.mainShare).toBeGreaterThan(0.9)
            expect(layout.cut).toEqual([])
            expect(yield* axeViolations(page)).toEqual([])
          }
          expect(pageErrors).toEqual([])
        }),
      90_000
    )
  })
})
