import { describe, expect, layer } from "@effect/vitest"
import { QueueEvents } from "bullmq"
import { Effect, Option, Redacted } from "effect"
import { AppConfig } from "../src/Config.js"
import { serviceEnvironment, settlementQueue, startService, waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { getWallet, newKey, postCredit } from "./support/Wallets.js"

/**
 * D19: a model and a label value are what the console, the spend report and the CSV show, so none
 * may hold what prints as nothing or reorders what prints (format and bidi characters, line and
 * paragraph separators, private-use and unassigned code points), nor be white space only. A
 * settlement job carrying one fails at once, its reason naming the field, and applies nothing; a
 * limit whose label scope names one is 422. Plain BullMQ against a real worker process, and HTTP.
 */

/** One of each category D19 names, and a model of spaces. */
const INVISIBLE = {
  "U+202E (bidi override)": "gpt\u202E4o",
  "U+2028 (line separator)": "gpt\u20284o",
  "U+200B (zero-width space)": "gpt\u200B4o",
  "U+FEFF (byte order mark)": "\uFEFFgpt-4o",
  "U+E000 (private use)": "gpt-\uE000",
  "U+0378 (unassigned)": "gpt-\u0378"
} as const

layer(TestApp(), { excludeTestServices: true, timeout: "90 seconds" })(
  "invisible text in labels and models (D19)",
  (it) => {
    describe("settlement jobs", () => {
      it.scoped("a model or a label value holding a format character, or a model of spaces, fails at once and applies nothing", () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const prefix = `${config.redisPrefix}:invisible`
          const worker = yield* startService("worker", serviceEnvironment(config, prefix))
          const queue = yield* settlementQueue(config, prefix)
          const events = yield* Effect.acquireRelease(
            Effect.sync(() =>
              new QueueEvents("settlement", { connection: { url: Redacted.value(config.redisUrl) }, prefix })
            ),
            (events) => Effect.promise(() => events.close())
          )
          yield* waitFor(
            "the worker takes jobs",
            Effect.promise(() => queue.getWorkers()).pipe(
              Effect.map((workers) => workers.length > 0 ? Option.some(true) : Option.none())
            ),
            { limit: "30 seconds", alive: [worker] }
          )
          const admin = yield* signedInUser({ admin: true })
          expect((yield* postCredit(admin.token, { amount_usd: "10", idempotency_key: newKey() })).status).toBe(200)
          const before = (yield* getWallet(admin.token)).body

          /** The job's end: its result, or the reason it failed and how many attempts it took. */
          const settle = (name: string, data: Record<string, unknown>) =>
            Effect.promise(async () => {
              const job = await queue.add(name, data, { attempts: 5, backoff: { type: "fixed", delay: 200 } })
              const result = await job.waitUntilFinished(events, 30_000).then(
                (value: unknown) => ({ result: value }),
                (error: unknown) => ({ failed: String(error instanceof Error ? error.message : error) })
              )
              const state = await queue.getJob(job.id ?? "")
              return { ...result, attempts: state?.attemptsMade ?? -1 }
            })

          const base = { account_id: admin.id, amount_usd: "1" }
          const refused: Array<{ readonly what: string; readonly failed?: string; readonly attempts: number }> = []
          for (const [what, text] of Object.entries(INVISIBLE)) {
            const session = newKey()
            refused.push({
              what: `label ${what}`,
              ...(yield* settle("reserve", {
                ...base,
                session_id: session,
                idempotency_key: newKey(),
                labels: { team: text }
              }))
            })
          }
          // The model is on a spend: a session reserved with a clean label first.
          const session = newKey()
          const reserved = yield* settle("reserve", {
            ...base,
            amount_usd: "2",
            session_id: session,
            idempotency_key: newKey(),
            labels: { team: "infra" }
          })
          expect(reserved).toMatchObject({ result: { status: "applied" } })
          const afterReserve = (yield* getWallet(admin.token)).body
          for (const [what, text] of [...Object.entries(INVISIBLE), ["spaces only", "   "] as const]) {
            refused.push({
              what: `model ${what}`,
              ...(yield* settle("spend", { ...base, session_id: session, idempotency_key: newKey(), model: text }))
            })
          }

          for (const job of refused) {
            expect(job, job.what).toMatchObject({ attempts: 1 })
            expect(job.failed, job.what).toMatch(
              job.what.startsWith("label")
                ? /^invalid_payload: .*labels\.team must not contain format/
                : job.what.endsWith("spaces only")
                ? /^invalid_payload: .*model must not be white space only/
                : /^invalid_payload: .*model must not contain format/
            )
          }
          // Nothing applied: the wallet is as the clean reserve left it, which only the clean reserve changed.
          expect((yield* getWallet(admin.token)).body).toEqual(afterReserve)
          expect(afterReserve).not.toEqual(before)
          // The same model, clean, is taken.
          expect(yield* settle("spend", { ...base, session_id: session, idempotency_key: newKey(), model: "gpt-4o" }))
            .toMatchObject({ result: { status: "applied" } })
        }))
    })

    describe("over HTTP", () => {
      it.effect("a label limit whose scope id's value holds a format character, or is blank, is 422 and saves nothing", () =>
        Effect.gen(function*() {
          const admin = yield* signedInUser({ admin: true })
          for (const value of [...Object.values(INVISIBLE), "  "]) {
            const reply = yield* call("PUT", "/developer/account/limits", {
              token: admin.token,
              body: { limits: [{ scope: "label", scope_id: `team=${value}`, period: "day", amount_usd: "5" }] }
            })
            expect(reply.status, JSON.stringify(value)).toBe(422)
            expect(JSON.stringify(reply.body), JSON.stringify(value)).toMatch(/format|white space/)
          }
          const saved = yield* call("GET", "/developer/account/limits", { token: admin.token })
          expect((saved.body as { limits: ReadonlyArray<unknown> }).limits).toEqual([])
          const clean = yield* call("PUT", "/developer/account/limits", {
            token: admin.token,
            body: { limits: [{ scope: "label", scope_id: "team=infra", period: "day", amount_usd: "5" }] }
          })
          expect(clean.status, JSON.stringify(clean.body)).toBe(200)
        }))
    })
  }
)
