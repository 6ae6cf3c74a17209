import { HttpApiBuilder, HttpApiSwagger, HttpMiddleware, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { createServer, type Server } from "node:http"
import { Api } from "./Api.js"
import { AuthHttpLive } from "./Auth/Http.js"
import { AppConfig } from "./Config.js"
import { DashboardLive } from "./Dashboard/Http.js"
import { observability } from "./Http/Observability.js"
import { ProblemsLive } from "./Http/Problems.js"
import { Metrics } from "./Metrics.js"
import { OperationsHttpLive } from "./Operations/Http.js"
import { PoliciesHttpLive } from "./Policies/Http.js"
import { WalletsHttpLive } from "./Wallets/Http.js"

/** The contract implemented: every group's handlers plus the cross-cutting problem rendering. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([OperationsHttpLive, AuthHttpLive, PoliciesHttpLive, WalletsHttpLive, ProblemsLive])
)

/** `/openapi.json` and interactive docs at `/docs`, both generated from the contract (D9). */
const DocsLive = Layer.mergeAll(
  HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
  HttpApiSwagger.layer({ path: "/docs" })
)

/** The Node server behind the Effect one, for a graceful close. */
export class NodeServer extends Context.Tag("NodeServer")<NodeServer, Server>() {}

/** The listening socket, on `PORT`. */
export const NodeServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => {
    const server = createServer()
    return Layer.merge(NodeHttpServer.layer(() => server, { port: config.port }), Layer.succeed(NodeServer, server))
  })
)

/**
 * On shutdown, stop accepting and let requests in flight finish before the
 * handler is detached: built after the served app, so released before it (the
 * app's own release would otherwise leave late requests without a handler).
 * Whatever is still open after 8 s is cut, to exit well within 10 s.
 */
export const DrainOnShutdown = Layer.scopedDiscard(
  Effect.flatMap(NodeServer, (server) =>
    Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeIdleConnections()
      }).pipe(
        Effect.timeout("8 seconds"),
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => server.closeAllConnections()))
      )
    ))
)

/**
 * No trace exporter is configured (D9 asks for logs and metrics), so every
 * span would be built per request and dropped: the server's own (which parses
 * the URL and copies the headers into attributes), and those of traced service
 * methods and SQL statements. Whoever adds an exporter turns tracing back on here.
 */
const TracingOff = <ROut, E, R>(layer: Layer.Layer<ROut, E, R>) =>
  layer.pipe(HttpMiddleware.withTracerDisabledWhen(() => true), Layer.provide(Layer.setTracerEnabled(false)))

/**
 * Serves the API on the given server. The API (and everything it needs, the
 * database migrated) is built before the server layer, so the socket opens
 * only once there are handlers to answer.
 */
export const serveOn = <ROut, E, R>(server: Layer.Layer<ROut, E, R>) =>
  HttpApiBuilder.serve(observability).pipe(
    TracingOff,
    HttpServer.withLogAddress,
    Layer.provide(Layer.mergeAll(DocsLive, DashboardLive)),
    Layer.provideMerge(server),
    Layer.provide(ApiLive),
    Layer.provideMerge(Metrics.Default),
    Layer.provide(NodeHttpServer.layerContext)
  )
