import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import type { Page } from "playwright-core"
import { AppConfig } from "../src/Config.js"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { axeViolations, ConsoleTestApp, openPage, organisation, PHONE, signInThroughPage } from "./support/console.js"
import { createRepository } from "./support/policies.js"
import { plainRunner } from "./support/spendControls.js"
import { call } from "./support/TestApp.js"

/**
 * The overview live without polling and the account's names (D17's change notices, D20, D23), in
 * Chromium: an idle overview makes next to no request; a reserve sent through plain BullMQ moves
 * the held amount, the open sessions and a concurrency limit's count together; a refused session
 * is not open; repositories and users by name; events as sentences, a balance crossing one
 * threshold back and forth as one line; a phone's width without sideways scrolling.
 */

const runner = Effect.gen(function*() {
  const config = yield* AppConfig
  return yield* plainRunner(Redacted.value(config.redisUrl), config.settlementQueuePrefix)
})

const text = (page: Page, selector: string) => Effect.promise(() => page.locator(selector).first().innerText())

describe.skipIf(!hasChromium)("the console live and by name (D17, D20, D23)", () => {
  layer(ConsoleTestApp(), { excludeTestServices: true, timeout: "180 seconds" })("Chromium", (it) => {
    it.scoped(
      "an idle overview makes at most 4 requests in 20 s; a reserve moves the held amount, the sessions and a concurrency count together",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const web = yield* createRepository(org.organisationId, "web-frontend")
          const me = yield* call("GET", "/auth/me", { token: org.member.token })
          const memberName = (me.body as { user: { name: string } }).user.name
          const admin = org.admin.token
          expect(
            (yield* call("PUT", "/developer/account/wallet", {
              token: admin,
              body: { budget_usd: "15", idempotency_key: "live-budget" }
            })).status
          ).toBe(200)
          expect(
            (yield* call("PUT", "/developer/account/alerts", {
              token: admin,
              body: { expected_version: 0, thresholds: [{ amount_usd: "10" }] }
            })).status
          ).toBe(200)
          const { send } = yield* runner
          const job = (name: string, data: Record<string, string>) =>
            Effect.map(send(name, { account_id: org.organisationId, ...data }), (answer) => answer.result)
          // The balance crosses $10 back and forth: six crossings, one line.
          for (const n of [1, 2, 3]) {
            expect(yield* job("reserve", { session_id: `flip-${n}`, amount_usd: "6", idempotency_key: `flip-${n}-r` }))
              .toMatchObject({ status: "applied" })
            expect(yield* job("release", { session_id: `flip-${n}`, idempotency_key: `flip-${n}-x` }))
              .toMatchObject({ status: "applied" })
          }
          const limits = (version: number, monthly: string) =>
            call("PUT", "/developer/account/limits", {
              token: admin,
              body: {
                expected_version: version,
                limits: [
                  { scope: "account", period: "month", amount_usd: monthly },
                  { scope: "repository", scope_id: web, period: "concurrent", max_open_sessions: 3 }
                ]
              }
            })
          expect((yield* limits(0, "100")).status).toBe(200)
          expect((yield* limits(1, "150")).status).toBe(200)

          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          const requests: Array<string> = []
          page.on("request", (request) => {
            const url = new URL(request.url())
            if (!url.pathname.startsWith("/console")) requests.push(`${request.method()} ${url.pathname}${url.search}`)
          })
          yield* signInThroughPage(page, base, org.member.email)
          const events = page.locator("ol.events > li")
          yield* Effect.promise(() => events.first().waitFor())
          yield* Effect.promise(() => page.getByText("No session is open.").waitFor())

          // Events as sentences: the limits' change as what changed, the crossings as one line with a count.
          const sentences = yield* Effect.promise(() => page.locator(".event-sentence").allInnerTexts())
          expect(sentences[0]).toMatch(
            /changed the limits \(version 2\): the account's limit per month from \$100\.00 to \$150\.00$/
          )
          expect(sentences[1]).toMatch(
            /set the limits \(version 1\): the account's limit per month \$100\.00; repository web-frontend's limit of sessions at once 3 at once$/
          )
          const crossings = sentences.filter((sentence) => sentence.startsWith("Crossed $10.00"))
          expect(crossings).toHaveLength(1)
          expect(crossings[0]).toMatch(/^Crossed \$10\.00 \d times since .*; the last: Available rose back to \$10\.00/)
          expect(sentences.filter((sentence) => /^Session flip-\d closed: spent \$0\.00$/.test(sentence)).length)
            .toBeGreaterThan(0)
          // Names, not ids: the concurrency limit names its repository.
          expect(yield* text(page, "ul.limits")).toContain("Repository web-frontend: 0 of 3 sessions open")

          // Idle: the page has read what it shows; for 20 s it only keeps its event stream open.
          yield* Effect.sleep("1 second")
          const before = requests.length
          yield* Effect.sleep("20 seconds")
          const idle = requests.slice(before)
          console.log(`an idle overview made ${idle.length} requests in 20 s: ${JSON.stringify(idle)}`)
          expect(idle.length).toBeLessThanOrEqual(4)

          // A reserve by plain BullMQ writes no event: the stream's change notice moves the three together.
          expect(
            yield* job("reserve", {
              session_id: "nightly-build-1",
              amount_usd: "2.5",
              repository_id: web,
              user_id: org.member.id,
              idempotency_key: "nightly-build-1-r"
            })
          ).toMatchObject({ status: "applied" })
          const together = yield* Effect.promise(async () => {
            await page.locator("[data-field=reserved_usd]", { hasText: "$2.50" }).waitFor({ timeout: 10_000 })
            return page.evaluate<{ held: string; rows: number; count: string }>(`(() => ({
              held: document.querySelector("[data-field=reserved_usd]").innerText,
              rows: [...document.querySelectorAll("table")].find((t) => t.caption?.innerText === "Open sessions")
                .querySelectorAll("tbody tr td[data-label]").length > 0 ? 1 : 0,
              count: document.querySelector("ul.limits").innerText
            }))()`)
          })
          expect(together.held).toBe("$2.50")
          expect(together.rows).toBe(1)
          expect(together.count).toContain("Repository web-frontend: 1 of 3 sessions open")
          const row = page.getByRole("row").filter({ hasText: "nightly-build-1" })
          const rowText = yield* Effect.promise(() => row.innerText())
          expect(rowText).toContain("web-frontend")
          expect(rowText).toContain(memberName)
          expect(rowText).not.toContain(web)

          // A reserve refused for want of funds: the session is known but not open, and not counted.
          expect(
            yield* job("reserve", {
              session_id: "refused-run-1",
              amount_usd: "14",
              repository_id: web,
              idempotency_key: "refused-run-1-r"
            })
          ).toMatchObject({ status: "insufficient_funds" })
          yield* Effect.sleep("1500 millis")
          expect(yield* Effect.promise(() => page.getByRole("row").filter({ hasText: "refused-run-1" }).count()))
            .toBe(0)
          expect(yield* text(page, "ul.limits")).toContain("Repository web-frontend: 1 of 3 sessions open")
          expect(yield* axeViolations(page)).toEqual([])

          // The sessions page shows it as refused, not as open with nothing held.
          yield* Effect.promise(async () => {
            await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Sessions" }).click()
            await page.getByRole("heading", { level: 1, name: "Sessions" }).waitFor()
          })
          const recent = page.getByRole("region", { name: "Sessions, newest first" })
          const refusedRow = recent.getByRole("row").filter({ hasText: "refused-run-1" })
          yield* Effect.promise(() => refusedRow.waitFor())
          expect(yield* Effect.promise(() => refusedRow.innerText())).toMatch(/refused/)
          expect(yield* Effect.promise(() => refusedRow.innerText())).not.toMatch(/\bopen\b/)
          expect(yield* axeViolations(page)).toEqual([])
          expect(pageErrors).toEqual([])
        }),
      150_000
    )

    it.scoped(
      "at 375 px the ledger and sessions become cards: nothing scrolls sideways, a long session id is cut in the middle and whole in its title",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const repository = yield* createRepository(org.organisationId, "a-repository-with-a-long-name-indeed")
          yield* call("PUT", "/developer/account/wallet", {
            token: org.admin.token,
            body: { budget_usd: "1234567.891234", idempotency_key: "phone-budget" }
          })
          const { send } = yield* runner
          const longId = "nightly-build-of-the-monorepo-2026-12-01-run-42"
          const answer = yield* send("reserve", {
            account_id: org.organisationId,
            session_id: longId,
            amount_usd: "1.000001",
            repository_id: repository,
            idempotency_key: "phone-reserve"
          })
          expect(answer.result).toMatchObject({ status: "applied" })
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base, PHONE)
          yield* signInThroughPage(page, base, org.member.email)
          for (
            const [hash, heading] of [["ledger", "Ledger"], ["sessions", "Sessions"], ["overview", "Overview"]] as const
          ) {
            const width = yield* Effect.promise(async () => {
              await page.evaluate(`window.location.hash = "#/${hash}"`)
              await page.getByRole("heading", { level: 1, name: heading }).waitFor()
              await page.locator("td[data-label]").first().waitFor()
              return page.evaluate<number>("document.documentElement.scrollWidth")
            })
            expect(width, hash).toBe(PHONE.width)
          }
          const shortened = page.locator(".id", { hasText: "…" }).first()
          expect(yield* Effect.promise(() => shortened.innerText())).toBe(`${longId.slice(0, 9)}…${longId.slice(-9)}`)
          expect(yield* Effect.promise(() => shortened.getAttribute("title"))).toBe(longId)
          // Amounts to the cent, sub-cent digits where they exist, the same on every card.
          expect(yield* text(page, "[data-field=reserved_usd]")).toBe("$1.000001")
          expect(yield* text(page, "[data-field=budget_usd]")).toBe("$1,234,567.891234")
          expect(pageErrors).toEqual([])
        }),
      120_000
    )
  })
})
