import { describe, expect, layer } from "@effect/vitest"
import { Queue, Worker } from "bullmq"
import { Effect, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { existsSync, mkdirSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { AppConfig } from "../src/Config.js"
import { SETTLEMENT_QUEUE } from "../src/Settlement/Jobs.js"
import { baseUrl, hasChromium, launchChromium } from "./support/browser.js"
import { createUser, PASSWORD, TestApp } from "./support/TestApp.js"

const SCREENSHOT = fileURLToPath(new URL("./artifacts/dashboard.png", import.meta.url))
const FAILURE_REASON = "Settlement refused on purpose by the dashboard browser test"
const JOB_ID = "browser-failed-reserve"

/**
 * A `reserve` job on the settlement queue (under this file's Redis prefix)
 * that fails once and for all: a worker of the test's own throws for it,
 * with a single attempt.
 */
const failedSettlementJob = (jobId = JOB_ID) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    // BullMQ leaves connections it was given open, so they are closed here, after the queue and the worker.
    const connect = Effect.acquireRelease(
      Effect.sync(() => new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })),
      (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
    )
    const queueConnection = yield* connect
    const workerConnection = yield* connect
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Queue(SETTLEMENT_QUEUE, { connection: queueConnection, prefix: config.settlementQueuePrefix })
      ),
      (queue) => Effect.promise(() => queue.close())
    )
    const worker = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Worker(SETTLEMENT_QUEUE, () => Promise.reject(new Error(FAILURE_REASON)), {
          connection: workerConnection,
          prefix: config.settlementQueuePrefix
        })
      ),
      (worker) => Effect.promise(() => worker.close())
    )
    const failed = new Promise<string>((resolve) => worker.on("failed", (job) => resolve(job?.id ?? "")))
    const payload = {
      account_id: "0190d2c4-8e7a-7a4b-9c1d-2e3f4a5b6c7d",
      session_id: "browser-session",
      amount_usd: "12.500000",
      idempotency_key: "browser-reserve"
    }
    yield* Effect.promise(() => queue.add("reserve", payload, { jobId, attempts: 1 }))
    expect(yield* Effect.promise(() => failed)).toBe(jobId)
    return payload
  }).pipe(Effect.scoped)

const DELAYED_JOB_ID = "browser-delayed-spend"

/** A `spend` job due in an hour: bull-board draws promote, reschedule, edit and clean for it. */
const delayedSettlementJob = Effect.gen(function*() {
  const config = yield* AppConfig
  const connection = yield* Effect.acquireRelease(
    Effect.sync(() => new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })),
    (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
  )
  const queue = yield* Effect.acquireRelease(
    Effect.sync(() => new Queue(SETTLEMENT_QUEUE, { connection, prefix: config.settlementQueuePrefix })),
    (queue) => Effect.promise(() => queue.close())
  )
  yield* Effect.promise(() => queue.add("spend", { n: 1 }, { jobId: DELAYED_JOB_ID, delay: 3_600_000 }))
}).pipe(Effect.scoped)

describe.skipIf(!hasChromium)("queue dashboard in a browser", () => {
  layer(TestApp(), { excludeTestServices: true })("Chromium", (it) => {
    it.scoped(
      "an operator signs in, sees the failed settlement job and no credential, and signs out",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const admin = yield* createUser({ operator: true })
          const payload = yield* failedSettlementJob()

          const browser = yield* launchChromium
          const context = yield* Effect.promise(() => browser.newContext({ viewport: { width: 1400, height: 900 } }))
          // Only our server is reachable: the board's web-font link must not make the test depend on the network.
          yield* Effect.promise(() =>
            context.route((url) => !url.href.startsWith(base), (route) => route.abort("blockedbyclient"))
          )
          const page = yield* Effect.promise(() => context.newPage())

          // Not signed in: the sign-in form, with 401.
          const first = yield* Effect.promise(() => page.goto(`${base}/admin/queues`))
          expect(first?.status()).toBe(401)

          yield* Effect.promise(async () => {
            await page.getByLabel("Email").fill(admin.email)
            await page.getByLabel("Password").fill(PASSWORD)
            await Promise.all([
              page.waitForURL(`${base}/admin/queues`),
              page.getByRole("button", { name: "Sign in" }).click()
            ])
          })
          const cookies = yield* Effect.promise(() => context.cookies(`${base}/admin/queues`))
          const session = cookies.find((cookie) => cookie.name === "account_api_admin")
          expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/admin/queues" })
          const token = session?.value ?? ""
          expect(token).not.toBe("")
          // HttpOnly: the page's scripts cannot read it.
          expect(yield* Effect.promise(() => page.evaluate("document.cookie"))).toBe("")

          yield* Effect.promise(async () => {
            await page.goto(`${base}/admin/queues/queue/${SETTLEMENT_QUEUE}?status=failed`)
            await page.getByText(FAILURE_REASON).first().waitFor({ timeout: 15_000 })
          })
          const failedTab = yield* Effect.promise(() => page.locator("body").innerText())
          expect(failedTab).toContain(JOB_ID)
          expect(failedTab).toContain("reserve")
          expect(failedTab).toContain(FAILURE_REASON)
          mkdirSync(fileURLToPath(new URL("./artifacts/", import.meta.url)), { recursive: true })
          yield* Effect.promise(() => page.screenshot({ path: SCREENSHOT, fullPage: true }))
          expect(existsSync(SCREENSHOT)).toBe(true)

          // D9: the job's payload is shown ...
          yield* Effect.promise(async () => {
            await page.getByText("Data", { exact: true }).first().click()
            await page.getByText(payload.idempotency_key).first().waitFor({ timeout: 15_000 })
          })
          const dataTab = yield* Effect.promise(() => page.locator("body").innerText())
          expect(dataTab).toContain(payload.account_id)
          expect(dataTab).toContain(payload.amount_usd)
          // ... and no credential is, anywhere in the document.
          const html = yield* Effect.promise(() => page.content())
          for (const secret of [token, token.split(".")[2] ?? token, PASSWORD, "account_api_admin"]) {
            for (const shown of [html, failedTab, dataTab]) expect(shown).not.toContain(secret)
          }

          // Signing out (the board's "Sign out" link leads here) clears the cookie.
          yield* Effect.promise(async () => {
            await page.goto(`${base}/admin/queues/logout`)
            await Promise.all([
              page.waitForURL(`${base}/admin/queues/login`),
              page.getByRole("button", { name: "Sign out" }).click()
            ])
          })
          const left = yield* Effect.promise(() => context.cookies(`${base}/admin/queues`))
          expect(left.map((cookie) => cookie.name)).not.toContain("account_api_admin")
        }),
      90_000
    )

    it.scoped(
      "a read-only operator sees retry and no add, clean, pause, promote or edit control (D9)",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const operator = yield* createUser({ operator: true })
          yield* failedSettlementJob("browser-failed-for-controls")
          yield* delayedSettlementJob

          const browser = yield* launchChromium
          const context = yield* Effect.promise(() => browser.newContext({ viewport: { width: 1400, height: 900 } }))
          yield* Effect.promise(() =>
            context.route((url) => !url.href.startsWith(base), (route) => route.abort("blockedbyclient"))
          )
          const page = yield* Effect.promise(() => context.newPage())
          yield* Effect.promise(async () => {
            await page.goto(`${base}/admin/queues/login`)
            await page.getByLabel("Email").fill(operator.email)
            await page.getByLabel("Password").fill(PASSWORD)
            await Promise.all([
              page.waitForURL(`${base}/admin/queues`),
              page.getByRole("button", { name: "Sign in" }).click()
            ])
          })

          /** Every control drawn and visible: its name (label or words) and its icon. */
          const controls = () =>
            page.evaluate<Array<string>>(`[...document.querySelectorAll("button, [role=menuitem]")]
              .filter((element) => element.checkVisibility())
              .map((element) => {
                const name = (element.getAttribute("aria-label") ?? element.textContent ?? "").trim()
                const icon = /lucide-([\\w-]+)/.exec(element.querySelector("svg")?.getAttribute("class") ?? "")?.[1] ?? ""
                return [name, icon === "" ? "" : "[" + icon + "]"].filter((part) => part !== "").join(" ")
              })`)
          /** What an operator may not do, by the words or icons bull-board draws for it. */
          const refused = (shown: ReadonlyArray<string>) =>
            shown.filter((control) =>
              /Add job|Clean|Promote|Pause|Resume|Empty|Obliterate|concurrency|rate limit|Duplicate|\[(trash|trash-2|trash2|pencil|files|pause|play|plus|arrow-up-from-line|clock|arrow-up-down-narrow-wide)\]/i
                .test(control)
            )

          // Failed jobs: "Retry all" and each job's retry, nothing else that writes.
          yield* Effect.promise(async () => {
            await page.goto(`${base}/admin/queues/queue/${SETTLEMENT_QUEUE}?status=failed`)
            await page.getByText(FAILURE_REASON).first().waitFor({ timeout: 15_000 })
          })
          const failedTab = yield* Effect.promise(controls)
          expect(failedTab).toContain("Retry all [refresh-cw]")
          expect(failedTab.filter((control) => control === "[refresh-cw]").length).toBeGreaterThanOrEqual(1)
          expect(refused(failedTab)).toEqual([])

          // Delayed jobs: bull-board would draw promote, reschedule, edit and clean: none is drawn.
          yield* Effect.promise(async () => {
            await page.goto(`${base}/admin/queues/queue/${SETTLEMENT_QUEUE}?status=delayed`)
            await page.getByText(DELAYED_JOB_ID).first().waitFor({ timeout: 15_000 })
          })
          expect(refused(yield* Effect.promise(controls))).toEqual([])

          // The queue's information: its settings are shown, not editable.
          yield* Effect.promise(async () => {
            await page.getByLabel("Queue info").click()
            await page.getByText("Connected workers").first().waitFor({ timeout: 15_000 })
          })
          expect(refused(yield* Effect.promise(controls))).toEqual([])

          // The overview's menu offers retrying failures, not pausing every queue.
          yield* Effect.promise(async () => {
            await page.goto(`${base}/admin/queues`)
            await page.locator("svg.lucide-ellipsis-vertical").first().click()
            await page.getByRole("menuitem").first().waitFor({ timeout: 15_000 })
          })
          const menu = yield* Effect.promise(controls)
          expect(menu.some((control) => /^Retry .*failed/.test(control))).toBe(true)
          expect(refused(menu)).toEqual([])
        }),
      90_000
    )
  })
})
