import { Layer } from "effect"
import { AppConfig } from "../src/Config.js"
import { LogLevelLive, runMain, Shutdown } from "../src/Logging.js"
import { Metrics } from "../src/Metrics.js"
import { DatabaseLive } from "../src/Sql.js"
import { TracingLive } from "../src/Tracing.js"
import { WebhookMetricsListenerLive } from "../src/Webhooks/MetricsListener.js"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"

Layer.mergeAll(WebhookWorkerLive, WebhookMetricsListenerLive).pipe(
  // The process's registry, served by its metrics port.
  Layer.provide(Metrics.Default),
  Layer.provide(DatabaseLive),
  Layer.provide(TracingLive("account-api-webhooks")),
  Layer.provide(LogLevelLive),
  Layer.provide(AppConfig.Default),
  // Outermost: released last, so its `stopped` line follows everything else's release.
  Layer.provide(Shutdown.Default),
  Layer.launch,
  runMain("webhooks")
)
