import { describe, expect, layer } from "@effect/vitest"
import { Queue } from "bullmq"
import { Effect, Redacted, Schedule } from "effect"
import { Redis as IORedis } from "ioredis"
import type { Page } from "playwright-core"
import { AppConfig } from "../src/Config.js"
import type { Grant } from "../src/Domain/Grants.js"
import { SETTLEMENT_QUEUE } from "../src/Settlement/Jobs.js"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { axeViolations, ConsoleTestApp, openPage, organisation, PHONE, signInThroughPage } from "./support/console.js"
import { call } from "./support/TestApp.js"

/**
 * The console's credit grants (D20, D21) in Chromium against the real API: the credit form's
 * expiry (typed in the browser's zone), priority and category and their 422s at their fields;
 * the Grants page in draw-down order with each grant's parts written beside its bar; the wallet
 * card's next expiry; a void asked first, its 409 and 404 said plainly; ledger entries and events
 * that name their grants.
 */

/** UTC−5 all year (the POSIX sign is reversed): the browser's zone, so its offset is not the server's. */
const ZONE = "Etc/GMT+5"
const ZONE_NAME = "GMT-5"
const DAY_MS = 86_400_000

/** A `datetime-local` value `days` ahead in ZONE, at 23:59 there. */
const localInput = (days: number) =>
  `${new Date(Date.now() + days * DAY_MS - 5 * 3_600_000).toISOString().slice(0, 10)}T23:59`

/** The instant that value names. */
const instantOf = (input: string) => new Date(`${input}:00-05:00`).getTime()

/** "9 Jan 2027, 23:59 GMT-5": how the console writes that value back. */
const wordsOf = (input: string) =>
  `${
    new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", year: "numeric", timeZone: "UTC" }).format(
      new Date(`${input}:00Z`)
    )
  }, 23:59 ${ZONE_NAME}`

/** A grant as the API sends it. */
type GrantReply = typeof Grant.Encoded

interface LedgerReply {
  readonly entries: ReadonlyArray<{
    readonly kind: string
    readonly amount_usd: string
    readonly grants: ReadonlyArray<{ readonly grant_id: string; readonly amount_usd: string }>
  }>
}

const grantsOf = (token: string) =>
  Effect.map(
    call("GET", "/developer/account/wallet/grants?state=all", { token }),
    (reply) => (reply.body as { grants: ReadonlyArray<GrantReply> }).grants
  )

const ledgerOf = (token: string) =>
  Effect.map(call("GET", "/developer/account/wallet/ledger", { token }), (reply) => reply.body as LedgerReply)

/** A credit through the API; answers its grant. */
const credit = (token: string, body: Readonly<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const reply = yield* call("POST", "/developer/account/wallet/credits", { token, body })
    expect(reply.status, JSON.stringify(reply.body)).toBe(200)
    return (reply.body as { grant: GrantReply }).grant
  })

const open = (page: Page, path: string, heading: string) =>
  Effect.promise(async () => {
    await page.getByRole("navigation").getByRole("link", { name: heading, exact: true }).click()
    await page.waitForURL(`**/console#/${path}`)
    await page.getByRole("heading", { level: 1, name: heading }).waitFor()
  })

const liveList = (page: Page) => page.getByRole("list", { name: "Live grants, in the order they are drawn" })
const endedList = (page: Page) => page.getByRole("list", { name: "Ended grants, newest first" })

/** The grants a list shows, by their headings ("Trial credit: $12.00"). */
const headings = (list: ReturnType<typeof liveList>) =>
  Effect.promise(() => list.getByRole("heading", { level: 3 }).allInnerTexts())

/** One grant's card: its heading starts with its name. */
const grantCard = (page: Page, name: string) =>
  page.getByRole("listitem").filter({ has: page.getByRole("heading", { level: 3, name: new RegExp(`^${name}:`) }) })

/** A settlement job sent through plain BullMQ, as a runner sends it; done once the wallet shows `until`. */
const settle = (
  token: string,
  name: "reserve" | "spend" | "release",
  payload: Readonly<Record<string, string>>,
  until: (wallet: { reserved_usd: string; spent_usd: string }) => boolean
) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const connection = yield* Effect.acquireRelease(
      Effect.sync(() => new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })),
      (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
    )
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(SETTLEMENT_QUEUE, { connection, prefix: config.settlementQueuePrefix })),
      (queue) => Effect.promise(() => queue.close())
    )
    yield* Effect.promise(() => queue.add(name, payload, { jobId: payload["idempotency_key"] ?? name }))
    yield* call("GET", "/developer/account/wallet", { token }).pipe(
      Effect.filterOrFail((reply) => until(reply.body as { reserved_usd: string; spent_usd: string })),
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("20 seconds")))
    )
  }).pipe(Effect.scoped)

describe.skipIf(!hasChromium)("the console's credit grants (D20, D21)", () => {
  layer(ConsoleTestApp(), { excludeTestServices: true, timeout: "120 seconds" })("Chromium", (it) => {
    it.scoped(
      "a credit with an expiry in the browser's zone, a priority and a category; the grants in draw-down order; the next expiry",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const token = org.admin.token
          const budget = yield* call("PUT", "/developer/account/wallet", {
            token,
            body: { budget_usd: "10", idempotency_key: "grants-base" }
          })
          expect(budget.status).toBe(200)
          const browser = yield* launchChromium
          const { page, pageErrors, offOrigin } = yield* openPage(browser, base, undefined, ZONE)
          const sent: Array<unknown> = []
          page.on("request", (request) => {
            if (request.method() === "POST" && request.url().endsWith("/developer/account/wallet/credits")) {
              sent.push(request.postDataJSON())
            }
          })
          yield* signInThroughPage(page, base, org.admin.email)
          yield* open(page, "credit", "Credit")

          const expires = localInput(40)
          expect(yield* Effect.promise(() => page.locator("#credit-expires-at-hint").innerText())).toContain(
            `(${ZONE_NAME})`
          )
          yield* Effect.promise(async () => {
            await page.getByLabel("Amount (USD)").fill("12")
            await page.getByLabel("Note (optional)").fill("Trial credit")
            await page.getByLabel("Expires (optional)").fill(expires)
            await page.getByLabel("Priority").fill("10")
            await page.getByLabel("Category").selectOption("promotional")
            await page.getByRole("button", { name: "Add credit" }).click()
            await page.getByRole("status").filter({ hasText: "Credit added" }).waitFor()
          })
          expect(yield* Effect.promise(() => page.getByRole("status").filter({ hasText: "Credit added" }).innerText()))
            .toBe(
              `Credit added: the budget is now $22.00. Trial credit: $12.00, priority 10, promotional, expires on ${
                wordsOf(expires)
              }.`
            )
          // Sent as ISO 8601 with the browser's offset; the service holds the instant it names.
          expect(sent).toEqual([
            expect.objectContaining({
              amount_usd: "12",
              note: "Trial credit",
              expires_at: `${expires}:00-05:00`,
              priority: 10,
              category: "promotional"
            })
          ])
          const [trial] = yield* grantsOf(token)
          expect(trial).toMatchObject({
            amount_usd: "12.000000",
            priority: 10,
            category: "promotional",
            note: "Trial credit",
            state: "live"
          })
          expect(new Date(trial?.expires_at ?? "").getTime()).toBe(instantOf(expires))
          // The credit's ledger entry names its grant.
          yield* Effect.promise(() =>
            page.getByRole("region", { name: "Newest first" }).getByText("Grant: Trial credit $12.00").waitFor()
          )

          // Three more: one with no note, never expiring, at the defaults; one drawn before all; one voided.
          const spare = yield* credit(token, { amount_usd: "5", idempotency_key: "grants-spare" })
          expect(spare).toMatchObject({ priority: 50, category: "paid", expires_at: null, note: null })
          yield* credit(token, {
            amount_usd: "3",
            idempotency_key: "grants-prepaid",
            note: "Prepaid",
            priority: 5,
            expires_at: new Date(Date.now() + 100 * DAY_MS).toISOString()
          })
          const old = yield* credit(token, { amount_usd: "1", idempotency_key: "grants-old", note: "Old promo" })
          const voided = yield* call("POST", `/developer/account/wallet/grants/${old.id}/void`, {
            token,
            body: { idempotency_key: "grants-old-void" }
          })
          expect(voided.status).toBe(200)

          yield* open(page, "grants", "Grants")
          yield* Effect.promise(() => liveList(page).waitFor())
          const spareName = `grant …${spare.id.slice(-8)}`
          // The order the service answers (draw-down), with the sentence saying so.
          expect(yield* headings(liveList(page))).toEqual([
            "Prepaid: $3.00",
            "Trial credit: $12.00",
            `Grant …${spare.id.slice(-8)}: $5.00`
          ])
          expect(yield* Effect.promise(() => page.locator("#draw-order").innerText())).toMatch(
            /^Sessions draw on them in this order, first to last: the lowest priority first/
          )
          expect(yield* headings(endedList(page))).toEqual(["Old promo: $1.00"])
          const card = grantCard(page, "Trial credit")
          const parts = yield* Effect.promise(() => card.locator(".grant-parts").innerText())
          expect(parts.replace(/\s+/g, " ")).toBe("Drawn $0.00 Held $0.00 Free $12.00 Ended $0.00")
          const terms = yield* Effect.promise(() => card.locator(".grant-terms").innerText())
          expect(terms.replace(/\s+/g, " ")).toContain(
            `State Live Priority 10 Category Promotional Expiry Expires on ${wordsOf(expires)} Note Trial credit`
          )
          expect(
            (yield* Effect.promise(() => grantCard(page, "Old promo").locator(".grant-parts").innerText())).replace(
              /\s+/g,
              " "
            )
          ).toBe("Drawn $0.00 Held $0.00 Free $0.00 Ended $1.00")
          expect(
            yield* Effect.promise(() => grantCard(page, "Old promo").locator("[data-field=state]").innerText())
          ).toBe("Voided")
          expect(yield* Effect.promise(() => grantCard(page, spareName.replace("grant", "Grant")).count())).toBe(1)

          // The wallet card: what expires next, in words.
          yield* open(page, "overview", "Overview")
          const next = page.locator("[data-field=next_expiry]")
          yield* Effect.promise(() => next.waitFor())
          expect(yield* Effect.promise(() => next.innerText())).toBe(
            `$12.00 expires on ${wordsOf(expires)} See the grants`
          )
          expect(pageErrors).toEqual([])
          expect(offOrigin).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "the credit form's 422s show at the field they name, which takes the focus; nothing is credited",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base, undefined, ZONE)
          yield* signInThroughPage(page, base, org.admin.email)
          yield* open(page, "credit", "Credit")
          const invalid = () =>
            Effect.promise(() =>
              page.locator("main [aria-invalid=true]").evaluateAll((fields) => fields.map((field) => field.id))
            )
          const focused = () => Effect.promise(() => page.evaluate<string>("document.activeElement?.id ?? ''"))
          const errorOf = (id: string) => Effect.promise(() => page.locator(`#${id}-error`).innerText())
          const submit = (waitFor: string) =>
            Effect.promise(async () => {
              await page.getByRole("button", { name: "Add credit" }).click()
              await page.locator(`#${waitFor}-error`).waitFor()
            })

          // A priority out of range.
          yield* Effect.promise(async () => {
            await page.getByLabel("Amount (USD)").fill("5")
            await page.getByLabel("Priority").fill("101")
          })
          yield* submit("credit-priority")
          expect(yield* invalid()).toEqual(["credit-priority"])
          expect(yield* errorOf("credit-priority")).toMatch(/0 to 100/)
          expect(yield* focused()).toBe("credit-priority")
          expect(yield* Effect.promise(() => page.getByText("Some values need fixing.").count())).toBe(1)

          // An expiry already past.
          yield* Effect.promise(async () => {
            await page.getByLabel("Priority").fill("20")
            await page.getByLabel("Expires (optional)").fill(localInput(-2))
          })
          yield* submit("credit-expires-at")
          expect(yield* invalid()).toEqual(["credit-expires-at"])
          expect(yield* focused()).toBe("credit-expires-at")
          expect((yield* errorOf("credit-expires-at")).length).toBeGreaterThan(0)

          // More than five years ahead.
          yield* Effect.promise(() => page.getByLabel("Expires (optional)").fill(localInput(6 * 366)))
          yield* submit("credit-expires-at")
          expect(yield* invalid()).toEqual(["credit-expires-at"])

          const violations = yield* axeViolations(page)
          expect(violations).toEqual([])

          // A category the service does not know (the form offers only two: the request is altered on its way).
          yield* Effect.promise(async () => {
            await page.getByLabel("Expires (optional)").fill("")
            await page.route("**/developer/account/wallet/credits", (route) =>
              route.continue({
                postData: JSON.stringify({ ...(route.request().postDataJSON() as object), category: "gift" })
              }))
          })
          yield* submit("credit-category")
          expect(yield* invalid()).toEqual(["credit-category"])
          expect(yield* focused()).toBe("credit-category")
          expect(yield* errorOf("credit-category")).toMatch(/paid|promotional/)
          expect((yield* ledgerOf(org.admin.token)).entries).toEqual([])

          yield* Effect.promise(async () => {
            await page.unroute("**/developer/account/wallet/credits")
            await page.getByRole("button", { name: "Add credit" }).click()
            await page.getByRole("status").filter({ hasText: "Credit added" }).waitFor()
          })
          expect(yield* invalid()).toEqual([])
          const grants = yield* grantsOf(org.admin.token)
          expect(grants.map((grant) => [grant.amount_usd, grant.priority, grant.category, grant.expires_at])).toEqual([
            ["5.000000", 20, "paid", null]
          ])
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "a void is asked first; a grant no longer live (409) or not found (404) says nothing was voided",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const token = org.admin.token
          yield* credit(token, { amount_usd: "2", idempotency_key: "void-promo", note: "Promo", priority: 10 })
          const spare = yield* credit(token, { amount_usd: "4", idempotency_key: "void-spare", note: "Spare" })
          yield* credit(token, { amount_usd: "1", idempotency_key: "void-third", note: "Third" })
          // Another account's grant: not found from this one.
          const other = yield* organisation
          const foreign = yield* credit(other.admin.token, { amount_usd: "9", idempotency_key: "void-foreign" })

          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.admin.email)
          yield* open(page, "grants", "Grants")
          const dialog = page.getByRole("dialog")
          const stateOf = (name: string) =>
            Effect.promise(() => grantCard(page, name).locator("[data-field=state]").innerText())

          // Asked first; "Keep it" voids nothing.
          yield* Effect.promise(async () => {
            await page.getByRole("button", { name: "Void Promo" }).click()
            await dialog.waitFor()
          })
          expect(yield* Effect.promise(() => dialog.getByRole("heading").innerText())).toBe("Void Promo?")
          expect(yield* Effect.promise(() => dialog.innerText())).toContain("Its free $2.00 leaves the budget now")
          // The safe choice has the focus.
          expect(yield* Effect.promise(() => page.evaluate<string>("document.activeElement?.textContent ?? ''")))
            .toBe("Keep it")
          expect(yield* axeViolations(page)).toEqual([])
          yield* Effect.promise(async () => {
            await dialog.getByRole("button", { name: "Keep it" }).click()
            await dialog.waitFor({ state: "detached" })
          })
          expect((yield* grantsOf(token)).map((grant) => grant.state)).toEqual(["live", "live", "live"])

          // Confirmed: voided, moved to the ended ones, its entry on the ledger.
          yield* Effect.promise(async () => {
            await page.getByRole("button", { name: "Void Promo" }).click()
            await dialog.getByRole("button", { name: "Void the grant" }).click()
            await page.getByText("Promo voided: $2.00 left the budget.").waitFor()
            await endedList(page).getByRole("heading", { name: "Promo: $2.00" }).waitFor()
          })
          expect(yield* stateOf("Promo")).toBe("Voided")
          expect(yield* Effect.promise(() => page.getByRole("button", { name: "Void Promo" }).count())).toBe(0)
          const afterVoid = yield* ledgerOf(token)
          expect(afterVoid.entries[0]).toMatchObject({ kind: "credit_voided", amount_usd: "2.000000" })

          // 409: voided by someone else between the page's read and the click.
          yield* Effect.promise(() =>
            page.route("**/developer/account/wallet/grants/*/void", async (route) => {
              await fetch(`${base}/developer/account/wallet/grants/${spare.id}/void`, {
                method: "POST",
                headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
                body: JSON.stringify({ idempotency_key: "void-spare-elsewhere" })
              })
              return route.continue()
            })
          )
          yield* Effect.promise(async () => {
            await page.getByRole("button", { name: "Void Spare" }).click()
            await dialog.getByRole("button", { name: "Void the grant" }).click()
            await page.getByText("Nothing was voided: this grant is no longer live (voided).").waitFor()
            await endedList(page).getByRole("heading", { name: "Spare: $4.00" }).waitFor()
          })
          expect(yield* Effect.promise(() => page.getByRole("alert").innerText())).toContain(
            "The list below is as the service has it now."
          )

          // 404: the request reaches another account's grant.
          yield* Effect.promise(async () => {
            await page.unroute("**/developer/account/wallet/grants/*/void")
            await page.route("**/developer/account/wallet/grants/*/void", (route) =>
              route.continue({
                url: route.request().url().replace(/grants\/[^/]+\/void$/, `grants/${foreign.id}/void`)
              }))
            await page.getByRole("button", { name: "Void Third" }).click()
            await dialog.getByRole("button", { name: "Void the grant" }).click()
            await page.getByText("Nothing was voided: this grant was not found.").waitFor()
            await page.unroute("**/developer/account/wallet/grants/*/void")
          })
          expect(yield* stateOf("Third")).toBe("Live")
          expect((yield* grantsOf(other.admin.token)).map((grant) => grant.state)).toEqual(["live"])

          // The ledger names the grant the void ended; the overview tells the event as a sentence.
          yield* open(page, "ledger", "Ledger")
          const voidRow = page.getByRole("row").filter({ hasText: "Credit voided" }).filter({ hasText: "Promo" })
          yield* Effect.promise(() => voidRow.getByText("Voided: Promo $2.00").waitFor())
          yield* open(page, "overview", "Overview")
          yield* Effect.promise(() =>
            page.locator("[data-type='grant.voided']").getByText(/^Promo was voided: \$2\.00 left the budget, now \$/)
              .waitFor()
          )
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "a grant past its expiry ends at the next change of the wallet: shown ended, its entry and event named",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const token = org.admin.token
          yield* credit(token, {
            amount_usd: "6",
            idempotency_key: "expiring-soon",
            note: "Short trial",
            expires_at: new Date(Date.now() + 5_000).toISOString()
          })
          yield* Effect.sleep("5500 millis")
          // The next writer of the wallet ends a due grant first (or the housekeeping sweep does).
          yield* credit(token, { amount_usd: "1", idempotency_key: "after-expiry", note: "Later" })
          const grants = yield* grantsOf(token)
          expect(grants.map((grant) => [grant.note, grant.state])).toEqual([["Later", "live"], [
            "Short trial",
            "expired"
          ]])

          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.admin.email)
          yield* Effect.promise(() =>
            page.locator("[data-type='grant.expired']").getByText(
              /^Short trial expired: \$6\.00 left the budget, now \$0\.00$/
            ).waitFor()
          )
          expect(yield* Effect.promise(() => page.locator("[data-field=next_expiry]").innerText())).toBe(
            "No credit is set to expire See the grants"
          )
          yield* open(page, "grants", "Grants")
          const card = grantCard(page, "Short trial")
          yield* Effect.promise(() => endedList(page).getByRole("heading", { name: "Short trial: $6.00" }).waitFor())
          expect(yield* Effect.promise(() => card.locator("[data-field=expires_at]").innerText())).toMatch(
            /^Expired on /
          )
          yield* open(page, "ledger", "Ledger")
          yield* Effect.promise(() =>
            page.getByRole("row").filter({ hasText: "Credit expired" }).getByText("Expired: Short trial $6.00")
              .waitFor()
          )
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "a session's hold and spend name the grants that paid, then the base; the grant's bar follows",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          const token = org.admin.token
          const me = yield* call("GET", "/auth/me", { token })
          const accountId = (me.body as { account: { id: string } }).account.id
          const budget = yield* call("PUT", "/developer/account/wallet", {
            token,
            body: { budget_usd: "10", idempotency_key: "paid-by-base" }
          })
          expect(budget.status).toBe(200)
          yield* credit(token, {
            amount_usd: "3",
            idempotency_key: "paid-by-trial",
            note: "Trial credit",
            priority: 10
          })

          const session = { account_id: accountId, session_id: "grants-session-1" }
          yield* settle(
            token,
            "reserve",
            { ...session, amount_usd: "5", idempotency_key: "paid-by-reserve" },
            (w) => w.reserved_usd === "5.000000"
          )
          const browser = yield* launchChromium
          const { page, pageErrors } = yield* openPage(browser, base)
          yield* signInThroughPage(page, base, org.admin.email)
          yield* open(page, "grants", "Grants")
          const card = grantCard(page, "Trial credit")
          yield* Effect.promise(() => card.waitFor())
          expect((yield* Effect.promise(() => card.locator(".grant-parts").innerText())).replace(/\s+/g, " ")).toBe(
            "Drawn $0.00 Held $3.00 Free $0.00 Ended $0.00"
          )

          yield* settle(
            token,
            "spend",
            { ...session, amount_usd: "4", idempotency_key: "paid-by-spend" },
            (w) => w.spent_usd === "4.000000"
          )
          yield* settle(
            token,
            "release",
            { ...session, idempotency_key: "paid-by-release" },
            (w) => w.reserved_usd === "0.000000"
          )
          // The page follows the wallet's change notices: the grant is used up, with no reload.
          yield* Effect.promise(() => endedList(page).getByRole("heading", { name: "Trial credit: $3.00" }).waitFor())
          expect((yield* Effect.promise(() => card.locator(".grant-parts").innerText())).replace(/\s+/g, " ")).toBe(
            "Drawn $3.00 Held $0.00 Free $0.00 Ended $0.00"
          )
          expect(yield* Effect.promise(() => card.locator("[data-field=state]").innerText())).toBe("Used up")

          const ledger = yield* ledgerOf(token)
          const spend = ledger.entries.find((entry) => entry.kind === "spend")
          expect(spend?.grants.map((share) => share.amount_usd)).toEqual(["3.000000"])

          yield* open(page, "sessions", "Sessions")
          yield* Effect.promise(async () => {
            await page.getByLabel("Session", { exact: true }).selectOption("grants-session-1")
            await page.getByRole("button", { name: "Show its entries" }).click()
          })
          const entries = page.getByRole("region", { name: "Entries of grants-session-1, oldest first" })
          const grantsCell = (kind: string) =>
            entries.getByRole("row").filter({ has: page.getByText(kind, { exact: true }) }).locator(".grant-shares")
          yield* Effect.promise(() =>
            grantsCell("Spend").getByText("Paid by: Trial credit $3.00, base $1.00").waitFor()
          )
          expect(yield* Effect.promise(() => grantsCell("Hold").innerText())).toBe(
            "Held on: Trial credit $3.00, base $2.00"
          )
          expect(yield* Effect.promise(() => grantsCell("Hold released").innerText())).toBe("Returned to: base $1.00")
          expect(pageErrors).toEqual([])
        }),
      90_000
    )

    it.scoped(
      "the Grants page: a member reads it without a void; axe-core finds nothing serious; it fits 375 px",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const org = yield* organisation
          yield* credit(org.admin.token, {
            amount_usd: "7.5",
            idempotency_key: "member-grant",
            note: "A note long enough to wrap on a narrow phone screen without pushing anything sideways",
            category: "promotional",
            expires_at: new Date(Date.now() + 20 * DAY_MS).toISOString()
          })
          const browser = yield* launchChromium

          const member = yield* openPage(browser, base)
          const refused: Array<string> = []
          member.page.on("response", (response) => {
            if (response.status() === 403) refused.push(response.url())
          })
          yield* signInThroughPage(member.page, base, org.member.email)
          yield* open(member.page, "grants", "Grants")
          yield* Effect.promise(() => liveList(member.page).getByRole("heading", { level: 3 }).first().waitFor())
          expect(yield* Effect.promise(() => member.page.locator("main button").count())).toBe(0)
          expect(yield* axeViolations(member.page)).toEqual([])
          expect(refused).toEqual([])

          const phone = yield* openPage(browser, base, PHONE)
          yield* signInThroughPage(phone.page, base, org.admin.email)
          const widths: Record<string, number> = {}
          for (const [path, control] of [["grants", "Void"], ["credit", "Add credit"]] as const) {
            widths[path] = yield* Effect.promise(async () => {
              await phone.page.evaluate(`window.location.hash = "#/${path}"`)
              await phone.page.getByRole("button", { name: new RegExp(`^${control}`) }).first().waitFor()
              return phone.page.evaluate<number>("document.documentElement.scrollWidth")
            })
          }
          expect(widths).toEqual({ grants: PHONE.width, credit: PHONE.width })
          expect(yield* axeViolations(phone.page)).toEqual([])
          expect([...member.pageErrors, ...phone.pageErrors]).toEqual([])
        }),
      90_000
    )
  })
})
