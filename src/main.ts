import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { AppConfig } from "./Config.js"
import { NodeServerLive, serveOn } from "./Http.js"
import { DatabaseLive } from "./Sql.js"

serveOn(NodeServerLive).pipe(
  Layer.provide(DatabaseLive),
  Layer.provide(AppConfig.Default),
  Layer.launch,
  NodeRuntime.runMain
)
