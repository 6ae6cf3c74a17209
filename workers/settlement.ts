import { Layer } from "effect"
import { AppConfig } from "../src/Config.js"
import { LogLevelLive, runMain, Shutdown } from "../src/Logging.js"
import { Metrics } from "../src/Metrics.js"
import { Settlement } from "../src/Settlement.js"
import { SettlementMetrics } from "../src/Settlement/Metrics.js"
import { WorkerMetricsListenerLive } from "../src/Settlement/MetricsListener.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { SettlementWorkerLive } from "../src/Settlement/Worker.js"
import { DatabaseLive } from "../src/Sql.js"
import { TracingLive } from "../src/Tracing.js"

Layer.mergeAll(SettlementWorkerLive, WorkerMetricsListenerLive).pipe(
  Layer.provide([Settlement.Default, SettlementMetrics.Default, SettlementQueue.Default]),
  // The process's registry, served by its metrics port.
  Layer.provide(Metrics.Default),
  Layer.provide(DatabaseLive),
  Layer.provide(TracingLive("account-api-worker")),
  Layer.provide(LogLevelLive),
  Layer.provide(AppConfig.Default),
  // Outermost: released last, so its `stopped` line follows everything else's release.
  Layer.provide(Shutdown.Default),
  Layer.launch,
  runMain("worker")
)
