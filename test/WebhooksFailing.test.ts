import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"
import { waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, postCredit } from "./support/Wallets.js"
import { receiver } from "./support/webhookReceiver.js"

/**
 * An endpoint with only failures for five days is disabled (D17). The schedule is compressed a
 * hundred thousand times: the retries of one event take about a second, five days about four.
 */
const TestLayer = WebhookWorkerLive.pipe(
  Layer.provideMerge(
    TestApp({ WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_RETRY_SCALE: "0.00001", WEBHOOK_RELAY_SWEEP_MS: "500" })
  )
)

interface Attempt {
  readonly event_id: string
  readonly attempt: number
  readonly outcome: string
  readonly status_code: number | null
}

layer(TestLayer, { excludeTestServices: true, timeout: "60 seconds" })("a failing endpoint (D17)", (it) => {
  it.scoped("is attempted eight times per event, then disabled after five (compressed) days of nothing but failures", () =>
    Effect.gen(function*() {
      const server = yield* receiver
      server.script.set("/down", [500])
      const admin = yield* signedInUser({ admin: true })
      const created = yield* call("POST", "/developer/account/webhooks", {
        token: admin.token,
        body: { url: server.url("/down"), types: ["wallet.credit_added"] }
      })
      expect(created.status).toBe(201)
      const id = (created.body as { id: string }).id
      const attempts = call("GET", `/developer/account/webhooks/${id}/deliveries?limit=500`, { token: admin.token })
        .pipe(Effect.map((reply) => (reply.body as { deliveries: ReadonlyArray<Attempt> }).deliveries))

      expect((yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })).status).toBe(200)
      const first = yield* waitFor(
        "the first event's retries are spent",
        Effect.map(attempts, (list) => list.some((a) => a.outcome === "failed") ? Option.some(list) : Option.none()),
        { limit: "30 seconds" }
      )
      expect(first.map((a) => [a.attempt, a.outcome, a.status_code])).toEqual([
        [8, "failed", 500],
        ...[7, 6, 5, 4, 3, 2, 1].map((n) => [n, "retrying", 500])
      ])
      const endpoint = yield* call("GET", `/developer/account/webhooks/${id}`, { token: admin.token })
      expect(endpoint.body).toMatchObject({ enabled: true })

      // Five compressed days after the first failure, the next failure disables it.
      yield* Effect.sleep("5 seconds")
      expect((yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })).status).toBe(200)
      const disabled = yield* waitFor(
        "the endpoint is disabled",
        Effect.map(call("GET", `/developer/account/webhooks/${id}`, { token: admin.token }), (reply) => {
          const body = reply.body as { enabled: boolean; disabled_reason: string | null }
          return body.enabled ? Option.none() : Option.some(body)
        }),
        { limit: "30 seconds" }
      )
      expect(disabled.disabled_reason).toBe("failing")
      const events = yield* call("GET", "/developer/account/events?type=webhook_endpoint.disabled", {
        token: admin.token
      })
      expect(events.body).toMatchObject({ events: [{ data: { endpoint: { id }, reason: "failing" } }] })
    }))
})
