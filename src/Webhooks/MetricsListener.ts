import { metricsListener } from "../Metrics/Listener.js"

/**
 * The webhooks process's own metrics at `GET /metrics` on `WEBHOOK_WORKER_METRICS_PORT`: its
 * deliveries by outcome and the relay's lag (`WebhookMetrics`), and its process (`process_*`,
 * `nodejs_*`). The deliveries counter is this process's own: Prometheus sums it over processes.
 */
export const WebhookMetricsListenerLive = metricsListener("webhooks", (config) => config.webhooks.metricsPort)
