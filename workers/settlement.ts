import { Layer } from "effect"
import { AppConfig } from "../src/Config.js"
import { LogLevelLive, runMain, TracingOff } from "../src/Logging.js"
import { Settlement } from "../src/Settlement.js"
import { SettlementMetrics } from "../src/Settlement/Metrics.js"
import { SettlementQueue } from "../src/Settlement/Queue.js"
import { SettlementWorkerLive } from "../src/Settlement/Worker.js"
import { DatabaseLive } from "../src/Sql.js"

SettlementWorkerLive.pipe(
  Layer.provide([Settlement.Default, SettlementMetrics.Default, SettlementQueue.Default]),
  Layer.provide(DatabaseLive),
  Layer.provide(LogLevelLive),
  Layer.provide(AppConfig.Default),
  Layer.provide(TracingOff),
  Layer.launch,
  runMain("worker")
)
