import { Layer } from "effect"
import { AppConfig } from "./Config.js"
import { DrainOnShutdown, NodeServerLive, serveOn } from "./Http.js"
import { LogLevelLive, runMain, Shutdown } from "./Logging.js"
import { DatabaseLive } from "./Sql.js"

DrainOnShutdown.pipe(
  Layer.provide(serveOn(NodeServerLive)),
  Layer.provide(DatabaseLive),
  Layer.provide(LogLevelLive),
  Layer.provide(AppConfig.Default),
  // Outermost: released last, so its `stopped` line follows everything else's release.
  Layer.provide(Shutdown.Default),
  Layer.launch,
  runMain("api")
)
