import { Layer } from "effect"
import { Events } from "../Events.js"
import { WebhookDeliveryLive } from "./Delivery.js"
import { DeliveriesInFlight } from "./InFlight.js"
import { WebhookMetrics } from "./Metrics.js"
import { WebhookQueue } from "./Queue.js"
import { WebhookRelayLive } from "./Relay.js"
import { WebhooksRepo } from "./Repo.js"

/**
 * What the webhooks process (`workers/webhooks.ts`) runs (D17): the relay from the event log to the
 * delivery queue and the delivery worker, with their metrics on the process's registry (`Metrics`,
 * which the program provides, so its `/metrics` shows them).
 */
export const WebhookWorkerLive = Layer.mergeAll(WebhookRelayLive, WebhookDeliveryLive).pipe(
  Layer.provide([WebhookMetrics.Default, DeliveriesInFlight.Default]),
  Layer.provide([WebhookQueue.Default, WebhooksRepo.Default, Events.Default])
)
