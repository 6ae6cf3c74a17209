import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { lookup } from "node:dns/promises"
import { createServer, isIP, type Server } from "node:net"
import { hostname } from "node:os"
import { addressVerdict } from "../src/Domain/NetworkAddress.js"
import { deliveryError } from "../src/Domain/Webhooks.js"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"
import { NON_PUBLIC } from "./support/addresses.js"
import { waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, putBudget } from "./support/Wallets.js"

/**
 * D17: without `WEBHOOK_ALLOW_INSECURE`, a webhook never reaches an address that is not public,
 * however it is spelt: refused at registration when the URL names it, and at every delivery on the
 * address the connection would be made to (a name's resolved ones, a literal's own).
 */
const TestLayer = WebhookWorkerLive.pipe(
  Layer.provideMerge(TestApp({ WEBHOOK_RETRY_SCALE: "0.0005", WEBHOOK_RELAY_SWEEP_MS: "500" }))
)

/** A URL's host in every spelling `new URL` takes, each naming an address that is not public. */
const REFUSED_URLS = [
  // IPv4 in decimal, octal, hex, short and percent-encoded forms: `new URL` writes them dotted.
  "https://127.0.0.1/",
  "https://127.0.0.1./",
  "https://2130706433/",
  "https://0x7f000001/",
  "https://0177.0.0.1/",
  "https://0x7f.1/",
  "https://0x7F.00.0.01/",
  "https://127.1/",
  "https://%31%32%37.0.0.1/",
  "https://0/",
  "https://167772161/",
  "https://0xa9.0xfe.0xa9.0xfe/",
  ...NON_PUBLIC.filter(([address]) => isIP(address) === 4).map(([address]) => `https://${address}/`),
  // IPv6, which `new URL` writes in hex: `[::ffff:127.0.0.1]` is kept as `[::ffff:7f00:1]`.
  "https://[::ffff:127.0.0.1]:8443/",
  "https://[0:0:0:0:0:ffff:7f00:1]/",
  "https://[64:ff9b::127.0.0.1]/",
  "https://[::127.0.0.1]/",
  // A zone (`%eth0`) is no part of a URL's host.
  ...NON_PUBLIC.filter(([address]) => isIP(address) === 6 && !address.includes("%")).map(([address]) =>
    `https://[${address}]/`
  ),
  "https://localhost/",
  "https://LOCALHOST./",
  "https://api.localhost/"
]

const PUBLIC_URLS = [
  "https://example.com/hook",
  "https://1.1.1.1/",
  "https://16843009/",
  "https://[2606:4700::1111]/",
  "https://[::ffff:808:808]/",
  "https://[64:ff9b::808:808]/",
  "https://[2002:808:808::1]/"
]

/** A TCP listener on the loopback addresses (IPv4 and, where the host has it, IPv6) that counts connections. */
const loopbackListener = Effect.acquireRelease(
  Effect.promise(async () => {
    let connections = 0
    const listen = (server: Server, host: string, port: number) =>
      new Promise<number | undefined>((resolve) => {
        server.once("error", () => resolve(undefined))
        server.listen(port, host, () => {
          const address = server.address()
          resolve(typeof address === "object" && address !== null ? address.port : undefined)
        })
      })
    const counting = () =>
      createServer((socket) => {
        connections++
        socket.destroy()
      })
    const v4 = counting()
    const port = await listen(v4, "127.0.0.1", 0)
    if (port === undefined) throw new Error("no loopback port")
    const v6 = counting()
    const hasV6 = (await listen(v6, "::1", port)) !== undefined
    return { port, hasV6, connections: () => connections, servers: hasV6 ? [v4, v6] : [v4] }
  }),
  ({ servers }) =>
    Effect.promise(() =>
      Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
    )
)

const machine = hostname()
const resolvesInside = await lookup(machine, { all: true }).then(
  (addresses) => addresses.length > 0 && addresses.every((entry) => addressVerdict(entry.address)?.public === false),
  () => false
)

interface Attempt {
  readonly outcome: string
  readonly status_code: number | null
  readonly error: string | null
}

layer(TestLayer, { excludeTestServices: true, timeout: "60 seconds" })("webhook addresses (D17)", (it) => {
  it.effect("every spelling of a non-public address is 422 webhook_url_refused at creation and change", () =>
    Effect.gen(function*() {
      const admin = yield* signedInUser({ admin: true })
      for (const url of REFUSED_URLS) {
        const reply = yield* call("POST", "/developer/account/webhooks", { token: admin.token, body: { url } })
        expect(reply.status, `${url}: ${JSON.stringify(reply.body)}`).toBe(422)
        expect(reply.body, url).toMatchObject({ code: "webhook_url_refused" })
        expect((reply.body as { detail: string }).detail, url).toContain("WEBHOOK_ALLOW_INSECURE=true")
      }
      const listed = yield* call("GET", "/developer/account/webhooks", { token: admin.token })
      expect(listed.body).toEqual({ endpoints: [] })

      const made = yield* call("POST", "/developer/account/webhooks", {
        token: admin.token,
        body: { url: "https://example.com/kept" }
      })
      expect(made.status).toBe(201)
      const path = `/developer/account/webhooks/${(made.body as { id: string }).id}`
      const before = (yield* call("GET", path, { token: admin.token })).body
      for (const url of REFUSED_URLS) {
        const reply = yield* call("PATCH", path, { token: admin.token, body: { url, enabled: false } })
        expect(reply.status, url).toBe(422)
        expect(reply.body, url).toMatchObject({ code: "webhook_url_refused" })
      }
      expect((yield* call("GET", path, { token: admin.token })).body).toEqual(before)
    }))

  it.effect("the refusal says which address and range, and names the setting that allows it in development", () =>
    Effect.gen(function*() {
      const admin = yield* signedInUser({ admin: true })
      const refusal = (url: string) =>
        Effect.map(
          call("POST", "/developer/account/webhooks", { token: admin.token, body: { url } }),
          (reply) => reply.body
        )
      expect(yield* refusal("https://[::ffff:127.0.0.1]/")).toMatchObject({
        code: "webhook_url_refused",
        detail:
          "url must not name a non-public address: ::ffff:7f00:1 is IPv4-mapped 127.0.0.1, loopback (127.0.0.0/8), allowed only where WEBHOOK_ALLOW_INSECURE=true, in development and tests"
      })
      expect(yield* refusal("http://example.com/hook")).toMatchObject({
        code: "webhook_url_refused",
        detail:
          "url must be an https URL (http is allowed only where WEBHOOK_ALLOW_INSECURE=true, in development and tests)"
      })
    }))

  it.effect("public addresses, embedded public IPv4 ones included, are accepted", () =>
    Effect.gen(function*() {
      const admin = yield* signedInUser({ admin: true })
      for (const url of PUBLIC_URLS) {
        const reply = yield* call("POST", "/developer/account/webhooks", { token: admin.token, body: { url } })
        expect(reply.status, `${url}: ${JSON.stringify(reply.body)}`).toBe(201)
      }
    }))

  it.scoped(
    "at delivery a literal or a name reaching loopback is never connected to, and the list shows only the class",
    () =>
      Effect.gen(function*() {
        const listener = yield* loopbackListener
        const sql = yield* SqlClient.SqlClient
        const admin = yield* signedInUser({ admin: true })
        const { port } = listener
        // Stored as a URL saved where WEBHOOK_ALLOW_INSECURE was on would be: the check at delivery
        // is what stands between them and the loopback listener.
        const stored = [
          `https://[::ffff:7f00:1]:${port}/`,
          `https://[::ffff:127.0.0.1]:${port}/`,
          `https://0x7f000001:${port}/`,
          `https://127.0.0.1:${port}/`,
          `https://[64:ff9b::7f00:1]:${port}/`,
          `https://[::7f00:1]:${port}/`,
          ...(listener.hasV6 ? [`https://[::1]:${port}/`] : []),
          `http://127.0.0.1:${port}/`
        ]
        const ids: Array<readonly [string, string]> = []
        for (const url of stored) {
          const made = yield* call("POST", "/developer/account/webhooks", {
            token: admin.token,
            body: { url: "https://example.com/placeholder", types: ["wallet.budget_set"] }
          })
          expect(made.status).toBe(201)
          const { id } = made.body as { readonly id: string }
          yield* sql`UPDATE webhook_endpoints SET url = ${url} WHERE id = ${id}`.pipe(Effect.orDie)
          ids.push([id, url])
        }
        // The machine's own name resolves to loopback (or its private address): saved as any name is.
        if (resolvesInside) {
          const made = yield* call("POST", "/developer/account/webhooks", {
            token: admin.token,
            body: { url: `https://${machine}:${port}/hook`, types: ["wallet.budget_set"] }
          })
          expect(made.status, JSON.stringify(made.body)).toBe(201)
          ids.push([(made.body as { readonly id: string }).id, machine])
        }
        expect((yield* putBudget(admin.token, { budget_usd: "10", idempotency_key: newKey() })).status).toBe(200)
        for (const [id, url] of ids) {
          const attempts = yield* waitFor(
            `two attempts to ${url} are recorded`,
            Effect.map(call("GET", `/developer/account/webhooks/${id}/deliveries`, { token: admin.token }), (reply) => {
              const list = (reply.body as { deliveries: Array<Attempt> }).deliveries
              return list.length >= 2 ? Option.some(list) : Option.none()
            }),
            { limit: "20 seconds" }
          )
          const expected = deliveryError(url.startsWith("http:") ? "url_refused" : "address_refused")
          for (const attempt of attempts) {
            expect(attempt, url).toMatchObject({ outcome: "retrying", status_code: null, error: expected })
          }
        }
        expect(listener.connections()).toBe(0)
      }),
    { timeout: 60_000 }
  )
})
