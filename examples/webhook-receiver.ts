// A webhook receiver (D17) on node:http with @account-api/client: each delivery is verified
// (Standard Webhooks signature and timestamp, then the event against the catalog) before anything
// is done with it, and handled once per webhook-id, as deliveries come at least once.
//   WEBHOOK_SECRETS=whsec_… PORT=3000 npx tsx webhook-receiver.ts
// WEBHOOK_SECRETS is the endpoint's secret (POST /developer/account/webhooks answers it once); it
// takes two, comma-separated, while a secret is rotated. MAX_DELIVERIES stops after that many.
// It changes nothing in the account; the endpoint you made for it is yours to DELETE.
import { verifyWebhook, WebhookVerificationFailed } from "@account-api/client"
import { createServer } from "node:http"

const secrets = (process.env.WEBHOOK_SECRETS ?? "").split(",").filter((secret) => secret !== "")
if (secrets.length === 0) throw new Error("set WEBHOOK_SECRETS")
const limit = Number(process.env.MAX_DELIVERIES ?? Infinity)
// A real receiver keeps these where its own writes are (a unique key in its database).
const handled = new Set<string>()
let deliveries = 0

const server = createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    deliveries += 1
    try {
      // The body exactly as received: the signature covers its bytes.
      const event = verifyWebhook(secrets, Buffer.concat(chunks), request.headers)
      if (handled.has(event.id)) {
        console.log(`duplicate ${event.id} ${event.type}`)
      } else {
        handled.add(event.id)
        console.log(`verified ${event.id} ${event.type} at ${event.timestamp}`)
        if (event.type === "wallet.balance_low") console.log(`  below ${event.data.threshold_usd}`)
      }
      // Any 2xx within 10 s is delivered; slow work belongs in a queue of the receiver's.
      response.writeHead(204).end()
    } catch (error) {
      if (!(error instanceof WebhookVerificationFailed)) throw error
      console.log(`refused ${error.reason}`)
      response.writeHead(400, { "content-type": "text/plain" }).end(error.reason)
    }
    if (deliveries >= limit) server.close()
  })
})
const port = Number(process.env.PORT ?? 3000)
server.listen(port, () => console.log(`listening on ${port}`))
