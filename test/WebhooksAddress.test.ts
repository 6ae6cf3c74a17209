import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { lookup } from "node:dns/promises"
import { hostname } from "node:os"
import { isInternalAddress } from "../src/Webhooks/Rules.js"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"
import { waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, putBudget } from "./support/Wallets.js"

/**
 * D17: without `WEBHOOK_ALLOW_INSECURE`, a URL's name is checked on the addresses it resolves to
 * when each delivery connects, not only when the endpoint is saved. The machine's own name is a
 * name (so saving it is allowed) that resolves to an internal address (loopback or the host's
 * private one), as a name pointed inside a network later would.
 */
const TestLayer = WebhookWorkerLive.pipe(
  Layer.provideMerge(TestApp({ WEBHOOK_RETRY_SCALE: "0.0005", WEBHOOK_RELAY_SWEEP_MS: "500" }))
)

const machine = hostname()
const resolvesInside = await lookup(machine, { all: true }).then(
  (addresses) => addresses.length > 0 && addresses.every((entry) => isInternalAddress(entry.address)),
  () => false
)

layer(TestLayer, { excludeTestServices: true, timeout: "60 seconds" })("webhook addresses (D17)", (it) => {
  it.effect.skipIf(!resolvesInside)(
    "a name saved as a URL that resolves to an internal address is refused at delivery, never connected to",
    () =>
      Effect.gen(function*() {
        const admin = yield* signedInUser({ admin: true })
        const created = yield* call("POST", "/developer/account/webhooks", {
          token: admin.token,
          body: { url: `https://${machine}:9/hook`, types: ["wallet.budget_set"] }
        })
        expect(created.status, JSON.stringify(created.body)).toBe(201)
        const { id } = created.body as { readonly id: string }
        expect((yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        const [attempt] = yield* waitFor(
          "the first attempt is recorded",
          Effect.map(call("GET", `/developer/account/webhooks/${id}/deliveries`, { token: admin.token }), (reply) => {
            const list = (reply.body as { deliveries: Array<{ outcome: string; error: string | null }> }).deliveries
            return list.length > 0 ? Option.some(list) : Option.none()
          }),
          { limit: "20 seconds" }
        )
        expect(attempt?.outcome).toBe("retrying")
        // Refused by the address check itself: not a connection refused, nor a TLS failure.
        expect(attempt?.error).toMatch(new RegExp(`${machine} resolves to .*, an internal address`))
      })
  )
})
