import { Layer } from "effect"
import { AppConfig } from "./Config.js"
import { Events } from "./Events.js"
import { EventsPruningLive } from "./Events/Pruning.js"
import { DrainOnShutdown, NodeServerLive, serveOn } from "./Http.js"
import { LogLevelLive, runMain, Shutdown } from "./Logging.js"
import { DatabaseLive } from "./Sql.js"

// The API's processes keep the event log to its 30 days (D17), beside serving it.
Layer.mergeAll(DrainOnShutdown, EventsPruningLive).pipe(
  Layer.provide(serveOn(NodeServerLive)),
  Layer.provide(Events.Default),
  Layer.provide(DatabaseLive),
  Layer.provide(LogLevelLive),
  Layer.provide(AppConfig.Default),
  // Outermost: released last, so its `stopped` line follows everything else's release.
  Layer.provide(Shutdown.Default),
  Layer.launch,
  runMain("api")
)
