import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Layer } from "effect"
import { AppConfig } from "./Config.js"
import { DrainOnShutdown, NodeServerLive, serveOn } from "./Http.js"
import { LoggingLive } from "./Logging.js"
import { DatabaseLive } from "./Sql.js"

DrainOnShutdown.pipe(
  Layer.provide(serveOn(NodeServerLive)),
  Layer.provide(DatabaseLive),
  Layer.provide(LoggingLive),
  Layer.provide(AppConfig.Default),
  Layer.launch,
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
