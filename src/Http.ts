import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Context, Effect, Layer } from "effect"
import { createServer, type Server } from "node:http"
import { DirectoryHttpLive } from "./Accounts/Http.js"
import { Api } from "./Api.js"
import { AuthHttpLive } from "./Auth/Http.js"
import { AppConfig } from "./Config.js"
import { ConsoleLive } from "./Console/Http.js"
import { DashboardLive } from "./Dashboard/Http.js"
import { EventsHttpLive } from "./Events/Http.js"
import { noStore } from "./Http/CacheControl.js"
import { cors } from "./Http/Cors.js"
import { DocumentsLive } from "./Http/Docs.js"
import { observability, routeOf } from "./Http/Observability.js"
import { MaxBodySizeLive, ProblemsLive } from "./Http/Problems.js"
import { consoleHeaders, noSniff } from "./Http/SecurityHeaders.js"
import { logDraining, TracingOff } from "./Logging.js"
import { Metrics } from "./Metrics.js"
import { OperationsHttpLive } from "./Operations/Http.js"
import { PoliciesHttpLive } from "./Policies/Http.js"
import { SettingsHttpLive } from "./Settings/Http.js"
import { EffectiveLimitsHttpLive, SessionsHttpLive } from "./Settlement/Http.js"
import { SpendHttpLive } from "./SpendControls/Http.js"
import { TracingLive, tracingOn } from "./Tracing.js"
import { WalletsHttpLive } from "./Wallets/Http.js"
import { WebhooksHttpLive } from "./Webhooks/Http.js"

/** The contract implemented: every group's handlers plus the cross-cutting problem rendering. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([
    OperationsHttpLive,
    AuthHttpLive,
    DirectoryHttpLive,
    PoliciesHttpLive,
    WalletsHttpLive,
    SessionsHttpLive,
    SettingsHttpLive,
    SpendHttpLive,
    EffectiveLimitsHttpLive,
    EventsHttpLive,
    WebhooksHttpLive,
    ProblemsLive
  ])
)

/** The Node server behind the Effect one, for a graceful close. */
export class NodeServer extends Context.Tag("NodeServer")<NodeServer, Server>() {}

/** The listening socket, on `PORT`. */
export const NodeServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => {
    const server = createServer()
    const listening = NodeHttpServer.layer(() => server, { port: config.port }).pipe(
      // Said plainly: the framework's own error is "An error has occurred" with the reason two causes down.
      Layer.mapError((error) =>
        String(error.cause).includes("EADDRINUSE")
          ? new Error(`port ${config.port} is already in use (another instance?); stop it or set PORT`)
          : error
      )
    )
    return Layer.merge(listening, Layer.succeed(NodeServer, server))
  })
)

/** A stopping server still takes connections for a moment, then waits this long at most for the answers it owes. */
const SHUTDOWN_GRACE = "1 second"
const DRAIN_LIMIT = "7 seconds"

/**
 * On shutdown, let requests in flight finish before the handler is detached:
 * built after the served app, so released before it (the app's own release
 * would otherwise leave late requests without a handler).
 *
 * The listener is not closed at once: that drops requests clients have already
 * sent (the kernel resets connections it completed that the process has not
 * accepted yet, and `server.close()` destroys connections whose request is not
 * read yet). For a second the server still takes what reaches it, answering
 * with `Connection: close`; then it stops listening and waits for the answers
 * still owed. Whatever is open 8 s after the signal is cut, to exit well within
 * 10 s.
 */
export const DrainOnShutdown = Layer.scopedDiscard(
  Effect.gen(function*() {
    const server = yield* NodeServer
    // Requests read and not yet answered, for the `draining` line (D9).
    let inFlight = 0
    server.on("request", (_request, response) => {
      inFlight += 1
      response.once("close", () => {
        inFlight -= 1
      })
    })
    const openConnections = Effect.async<number>((resume) => {
      server.getConnections((error, count) => resume(Effect.succeed(error === null ? count : 0)))
    })
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        // Ahead of the app's handler, which may answer before a later listener runs.
        server.prependListener("request", (_request, response) => response.setHeader("connection", "close"))
        yield* logDraining({ requests_in_flight: inFlight, connections_open: yield* openConnections })
        yield* Effect.sleep(SHUTDOWN_GRACE)
        // Interruptible, or the timeout (which interrupts the wait) would itself wait for every
        // connection to close: a finalizer runs uninterruptibly, and so would the wait it forks.
        yield* Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeIdleConnections()
        }).pipe(Effect.interruptible, Effect.timeout(DRAIN_LIMIT), Effect.ignore)
      }).pipe(Effect.ensuring(Effect.sync(() => server.closeAllConnections())))
    )
  })
)

/**
 * Tracing off (see `TracingOff`), including the server's own span per request,
 * which parses the URL and copies the headers into attributes.
 */
const withoutTracing = <ROut, E, R>(layer: Layer.Layer<ROut, E, R>) =>
  layer.pipe(HttpMiddleware.withTracerDisabledWhen(() => true), Layer.provide(TracingOff))

/**
 * With `OTEL_EXPORTER_OTLP_ENDPOINT` set, one trace per request (D18): the server span, named
 * by method and route template (`GET /developer/account/wallet`, never a raw id) and carrying
 * `http.route` and the status, with the request's SQL statements as its children. A caller's
 * `traceparent` header makes it part of the caller's trace. Unset, `withoutTracing`.
 */
const tracing = <ROut, E, R>(layer: Layer.Layer<ROut, E, R>) =>
  Layer.unwrapEffect(
    Effect.map(tracingOn, (on) =>
      on
        ? layer.pipe(
          HttpMiddleware.withSpanNameGenerator((request) =>
            `${request.method} ${routeOf(request.method, request.url)}`
          ),
          Layer.provide(TracingLive("account-api"))
        )
        : withoutTracing(layer))
  )

/** Names the request's route on its span, when requests are traced. */
const routeOnSpan = HttpMiddleware.make((app) =>
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) => Effect.zipRight(Effect.annotateCurrentSpan("http.route", routeOf(request.method, request.url)), app)
  )
)

/**
 * Serves the API on the given server. The API (and everything it needs, the
 * database migrated) is built before the server layer, so the socket opens
 * only once there are handlers to answer.
 */
export const serveOn = <ROut, E, R>(server: Layer.Layer<ROut, E, R>) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const metrics = yield* Metrics
      const config = yield* AppConfig
      const allowOrigins = cors(config.corsOrigins)
      const traced = yield* tracingOn
      return HttpApiBuilder.serve((app) =>
        observability(metrics)(allowOrigins(noSniff(consoleHeaders(noStore(traced ? routeOnSpan(app) : app)))))
      )
    })
  ).pipe(
    tracing,
    // The router's default refuses a path parameter over 100 characters as "no such route"; the
    // handlers decide what an id of any length means (D3: a repository id that is no UUID is unknown).
    Layer.provide(HttpRouter.setRouterConfig({ maxParamLength: 16 * 1024 })),
    Layer.provide(MaxBodySizeLive),
    HttpServer.withLogAddress,
    Layer.provide(Layer.mergeAll(DocumentsLive, DashboardLive, ConsoleLive)),
    Layer.provideMerge(server),
    Layer.provide(ApiLive),
    Layer.provideMerge(Metrics.Default),
    Layer.provide(NodeHttpServer.layerContext)
  )
