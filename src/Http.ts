import { HttpApiBuilder, HttpMiddleware, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import { Api } from "./Api.js"
import { AuthHttpLive } from "./Auth/Http.js"
import { HealthHttpLive } from "./Health/Http.js"
import { AppConfig } from "./Config.js"
import { ProblemsLive } from "./Http/Problems.js"
import { WalletsHttpLive } from "./Wallets/Http.js"

/** The contract implemented: every group's handlers plus the cross-cutting problem rendering. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([HealthHttpLive, AuthHttpLive, WalletsHttpLive, ProblemsLive])
)

/** The listening socket, on `PORT`. */
export const NodeServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => NodeHttpServer.layer(createServer, { port: config.port }))
)

/**
 * Serves the API on the given server. The API (and everything it needs, the
 * database migrated) is built before the server layer, so the socket opens
 * only once there are handlers to answer.
 */
export const serveOn = <ROut, E, R>(server: Layer.Layer<ROut, E, R>) =>
  HttpApiBuilder.serve(HttpMiddleware.logger).pipe(
    HttpServer.withLogAddress,
    Layer.provideMerge(server),
    Layer.provide(ApiLive),
    Layer.provide(NodeHttpServer.layerContext)
  )
