import * as Headers from "@effect/platform/Headers"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { Auth } from "../Auth.js"
import { LoginRequest } from "../Auth/Api.js"
import { AppConfig } from "../Config.js"
import { Forbidden, NotFound, Unauthenticated, Unavailable } from "../Domain/Errors.js"
import { problem, type ProblemSource } from "../Domain/Problem.js"
import { clientAddress, trustedProxiesOf } from "../Http/ClientAddress.js"
import { DASHBOARD_PATH, QueueDashboard } from "./Board.js"
import { forbiddenPage, signInPage, signOutPage } from "./Pages.js"

/** Holds the bearer token of a dashboard sign-in; sent only to the dashboard's paths. */
export const DASHBOARD_COOKIE = "account_api_admin"

const SIGN_IN_PATH = `${DASHBOARD_PATH}/login`
/** How long a board request may wait on Redis before it answers 503. */
const BOARD_ANSWER_LIMIT = "3 seconds"
const SIGN_OUT_PATH = `${DASHBOARD_PATH}/logout`

const decodeSignIn = Schema.decodeUnknown(LoginRequest)

/** People get pages; the board's own API calls and scripts get D1 problems. */
const wantsHtml = (request: HttpServerRequest.HttpServerRequest) =>
  (request.headers["accept"] ?? "").includes("text/html")

/**
 * D1 problem bodies, but without the error's `WWW-Authenticate: Bearer`: the
 * dashboard takes its token from a cookie, never from that header.
 */
const problemResponse = <A extends { readonly _tag: string }, I extends { readonly _tag: string }>(
  error: A,
  source: ProblemSource<A, I>
) =>
  Schema.encode(problem(source))(error).pipe(
    Effect.map((body) =>
      HttpServerResponse.unsafeJson(body, {
        status: HttpApiSchema.getStatusError(source),
        contentType: "application/problem+json",
        headers: { "cache-control": "no-store" }
      })
    ),
    Effect.orDie
  )

/**
 * The queue dashboard at `/admin/queues` (D9): bull-board behind a sign-in
 * page. Signing in goes through `Auth.login` (same throttling, same sign-ins)
 * and leaves the bearer token in an HttpOnly, SameSite=Strict cookie scoped to
 * the dashboard's path; every other dashboard request checks that token (or
 * an `Authorization: Bearer` token) with `Auth.authenticate` (so revocation
 * and expiry apply) and needs the operator role: the board shows every
 * account's jobs, so an account's `is_admin` is not enough.
 * The routes live on the API's router, so the problem middleware, the body
 * limit and the request logs and metrics cover them too.
 */
export const DashboardLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const config = yield* AppConfig
    const proxies = trustedProxiesOf(config.trustedProxies)
    const dashboard = yield* QueueDashboard
    const board = HttpApp.fromWebHandler(dashboard.fetch)

    const cookieOptions = {
      httpOnly: true,
      sameSite: "strict",
      path: DASHBOARD_PATH,
      secure: config.isProduction
    } as const

    /** The operator's bearer token, or else the board's own sign-in cookie (D9). */
    const tokenOf = (request: HttpServerRequest.HttpServerRequest) => {
      const bearer = /^Bearer[ ]+(\S+)$/i.exec(request.headers["authorization"] ?? "")?.[1]
      return bearer ?? request.cookies[DASHBOARD_COOKIE] ?? ""
    }

    const requireOperator = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.flatMap(auth.authenticate(tokenOf(request)), (current) =>
        current.isOperator
          ? Effect.succeed(current)
          : Effect.fail(new Forbidden({ detail: "The queue dashboard is for operators only." })))

    /** Read-only but for retrying failed jobs (D9), whatever the board's pages offer or a client crafts. */
    const requireAllowed = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.flatMap(dashboard.allows(request.method, request.url), (verdict) => {
        switch (verdict) {
          case "allowed":
            return Effect.void
          case "ambiguous":
            return Effect.fail(
              new Forbidden({
                detail: "The queue dashboard refuses request paths with '#', '\\', dot segments or their escapes."
              })
            )
          case "refused":
            return Effect.fail(
              new Forbidden({ detail: "The queue dashboard is read-only, but for retrying failed jobs." })
            )
        }
      })

    /**
     * bull-board never sees the cookie or an Authorization header, so no
     * credential can reach anything it renders or logs.
     */
    const serveBoard = (request: HttpServerRequest.HttpServerRequest) =>
      board.pipe(
        Effect.provideService(
          HttpServerRequest.HttpServerRequest,
          request.modify({ headers: Headers.remove(request.headers, ["cookie", "authorization"]) })
        ),
        // A transport failure in the board is ours to log as a 500, not a client's malformed request.
        Effect.catchAll((error) => Effect.die(new Error(`The queue dashboard failed: ${error.message}`))),
        // The board reads Redis through the queue's connection, which waits for Redis as long as it takes.
        Effect.timeoutFail({
          duration: BOARD_ANSWER_LIMIT,
          onTimeout: () =>
            new Unavailable({ detail: "The queue is not answering; retry shortly.", retry_after_seconds: 5 })
        }),
        // The board answers its own errors in JSON, which its pages read; only "no such path" is its plain text.
        Effect.filterOrFail(
          (response) =>
            !(response.status === 404 && response.headers["content-type"]?.startsWith("text/plain") === true),
          () => new NotFound({ detail: `No route for ${request.method} ${request.url.split("?")[0]}.` })
        )
      )

    const guarded = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      return yield* requireOperator(request).pipe(
        Effect.zipRight(requireAllowed(request)),
        Effect.zipRight(serveBoard(request)),
        Effect.catchTags({
          NotFound: (error) => problemResponse(error, NotFound),
          Unauthenticated: (error) =>
            wantsHtml(request) ? Effect.succeed(signInPage({ status: 401 })) : problemResponse(error, Unauthenticated),
          Forbidden: (error) =>
            wantsHtml(request) ? Effect.succeed(forbiddenPage()) : problemResponse(error, Forbidden),
          Unavailable: (error) =>
            Effect.map(problemResponse(error, Unavailable), HttpServerResponse.setHeaders(error.responseHeaders))
        })
      )
    })

    const signIn = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const form = UrlParams.toRecord(yield* request.urlParamsBody)
      const emailTyped = typeof form.email === "string" ? form.email : ""
      const credentials = yield* decodeSignIn(form).pipe(Effect.option)
      if (Option.isNone(credentials)) {
        return signInPage({ status: 422, message: "Enter an email address and a password.", email: emailTyped })
      }
      const { email, password } = credentials.value
      return yield* auth.login(email, password, clientAddress(request, proxies)).pipe(
        Effect.flatMap((login) =>
          auth.authenticate(login.access_token).pipe(
            Effect.flatMap((current) =>
              current.isOperator
                ? Effect.succeed(
                  HttpServerResponse.redirect(DASHBOARD_PATH, { status: 303 }).pipe(
                    HttpServerResponse.unsafeSetCookie(DASHBOARD_COOKIE, login.access_token, {
                      ...cookieOptions,
                      maxAge: Duration.seconds(login.expires_in)
                    }),
                    HttpServerResponse.setHeader("cache-control", "no-store")
                  )
                )
                // Nobody will hold this sign-in's token, so it ends at once.
                : auth.logout(current).pipe(Effect.as(signInPage({
                  status: 403,
                  message: "This user is not an operator; the dashboard is for operators only.",
                  email
                })))
            ),
            // The sign-in was made a moment ago: not finding it is a fault, not a client's error.
            Effect.catchTag("Unauthenticated", (error) => Effect.die(new Error(error.detail)))
          )
        ),
        Effect.catchTags({
          InvalidCredentials: (error) => Effect.succeed(signInPage({ status: 401, message: error.detail, email })),
          RateLimited: (error) =>
            Effect.succeed(signInPage({
              status: 429,
              message: error.detail,
              email,
              headers: error.responseHeaders
            }))
        })
      )
    })

    const signOut = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      // An invalid or already revoked cookie has nothing left to end; it is cleared all the same.
      yield* auth.authenticate(tokenOf(request)).pipe(
        Effect.flatMap(auth.logout),
        Effect.catchTag("Unauthenticated", () => Effect.void)
      )
      return HttpServerResponse.redirect(SIGN_IN_PATH, { status: 303 }).pipe(
        HttpServerResponse.expireCookie(DASHBOARD_COOKIE, cookieOptions),
        HttpServerResponse.setHeader("cache-control", "no-store")
      )
    })

    yield* router.get(SIGN_IN_PATH, Effect.succeed(signInPage({ status: 200 })))
    yield* router.post(SIGN_IN_PATH, signIn)
    yield* router.get(SIGN_OUT_PATH, Effect.succeed(signOutPage()))
    yield* router.post(SIGN_OUT_PATH, signOut)
    yield* router.all(DASHBOARD_PATH, guarded)
    yield* router.all(`${DASHBOARD_PATH}/*`, guarded)
  })
).pipe(Layer.provide([QueueDashboard.Default, Auth.Default]))
