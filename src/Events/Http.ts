import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Clock, DateTime, Duration, Effect, Layer, Option, Queue, Stream } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { AppConfig } from "../Config.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { AlertsRecord, DEFAULT_EVENT_ORDER, WALLET_CHANGED_NOTICE } from "../Domain/Events.js"
import { DEFAULT_PAGE_SIZE } from "../Domain/Paging.js"
import { decodeRequest } from "../Domain/Strict.js"
import { Events, wireEvent } from "../Events.js"
import { cutWhenStalled } from "../Http/Stall.js"
import { Shutdown } from "../Logging.js"
import { AlertsRequest } from "./Api.js"
import { EventsHub } from "./Hub.js"
import type { EventRow } from "./Repo.js"

/** One event as SSE: its id, its type as the event name, and the event as one line of JSON. */
const sseEvent = (row: EventRow) => `id: ${row.id}\nevent: ${row.type}\ndata: ${JSON.stringify(wireEvent(row))}\n\n`

/** setTimeout's longest wait (about 24.8 days); a sign-in that lasts longer is looked at again then. */
const MAX_TIMER = 2 ** 31 - 1

const encoder = new TextEncoder()
const CONNECTED = encoder.encode(": connected\n\n")
const KEEP_ALIVE = encoder.encode(": keep-alive\n\n")
/** A change notice (D17): no `id:`, so a reader's Last-Event-ID stays the last event's. */
const WALLET_CHANGED = encoder.encode(`event: ${WALLET_CHANGED_NOTICE}\ndata: {}\n\n`)

/**
 * Each event's bytes, made once: the rows an account's reader keeps are the same objects for
 * every stream of the account, so twenty streams encode an event once, not twenty times.
 */
const encoded = new WeakMap<EventRow, Uint8Array>()
const bytesOf = (row: EventRow) => {
  let bytes = encoded.get(row)
  if (bytes === undefined) {
    bytes = encoder.encode(sseEvent(row))
    encoded.set(row, bytes)
  }
  return bytes
}
const bytesOfAll = (rows: ReadonlyArray<EventRow>) =>
  rows.length === 1 && rows[0] !== undefined
    ? bytesOf(rows[0])
    : Buffer.concat(rows.map(bytesOf))

export const EventsHttpLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const events = yield* Events
    const hub = yield* EventsHub
    const auth = yield* Auth
    const config = yield* AppConfig
    // Where the program provides it (the API's main does), the stream ends as draining begins.
    const draining = Option.match(yield* Effect.serviceOption(Shutdown), {
      onNone: () => Effect.never,
      onSome: (shutdown) => shutdown.drainingBegan
    })

    /**
     * The account's events after `from`, then each as it is committed: the stream follows its
     * account's reader before it reads, so an event committed while it reads wakes it again and
     * none falls between. A comment line goes out when nothing else has for the heartbeat interval.
     */
    const live = (caller: CurrentUser["Type"], from: number, notices: boolean) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const follower = yield* hub.follow(caller.account)
        const heartbeat = Duration.toMillis(config.eventsHeartbeat)
        const wake = () => Queue.unsafeOffer(follower.wakes, undefined)
        let position = from
        let noticed = follower.changes()
        let beatDue = false
        let ending = false
        // The stream ends with its sign-in (D2): looked at again whenever a change may have ended
        // it, as the sign-in expires, at every heartbeat, and before any event goes out.
        let checkDue = false
        const recheck = () => {
          checkDue = true
          wake()
        }
        yield* auth.watchSignIn(caller, recheck)
        yield* Effect.acquireRelease(
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() =>
              setTimeout(
                recheck,
                Math.min(MAX_TIMER, Math.max(0, DateTime.toEpochMillis(caller.signIn.expires_at) - now))
              )
            )),
          (timer) => Effect.sync(() => clearTimeout(timer))
        )
        // The heartbeat and shutdown wake the stream through the queue its account's reader wakes
        // it by, so that waiting costs no fiber per event (a timeout or an interruption would fork one).
        const beat = yield* Effect.acquireRelease(
          Effect.sync(() =>
            setTimeout(() => {
              beatDue = true
              wake()
            }, heartbeat)
          ),
          (timer) => Effect.sync(() => clearTimeout(timer))
        )
        // On shutdown the stream ends cleanly (its last chunk sent): a client reconnects with
        // Last-Event-ID, to a process that is not stopping, and misses nothing.
        yield* Effect.forkScoped(Effect.zipRight(
          draining,
          Effect.sync(() => {
            ending = true
            wake()
          })
        ))
        // Anything sent puts the next comment line a heartbeat later.
        const sent = () => {
          beatDue = false
          beat.refresh()
        }
        const next: Effect.Effect<Uint8Array, Option.Option<never>> = Effect.gen(function*() {
          for (;;) {
            if (ending) return yield* Effect.fail(Option.none())
            if (checkDue) {
              checkDue = false
              if (!(yield* auth.stillSignedIn(caller))) return yield* Effect.fail(Option.none())
            }
            const rows = yield* follower.after(position)
            const last = rows[rows.length - 1]
            // Asked after the events were read, so no event committed after the sign-in ended goes out.
            if (last !== undefined && !(yield* auth.stillSignedIn(caller))) return yield* Effect.fail(Option.none())
            if (last !== undefined) {
              position = last.position
              sent()
              return bytesOfAll(rows)
            }
            if (notices && follower.changes() !== noticed) {
              noticed = follower.changes()
              sent()
              return WALLET_CHANGED
            }
            if (beatDue) {
              if (!(yield* auth.stillSignedIn(caller))) return yield* Effect.fail(Option.none())
              sent()
              return KEEP_ALIVE
            }
            yield* Queue.take(follower.wakes)
          }
        })
        // A first line at once, so a client knows the stream is open before any event.
        return Stream.concat(Stream.make(CONNECTED), Stream.repeatEffectOption(next))
      }))

    return handlers
      .handle("getAlerts", () => Effect.flatMap(CurrentUser, ({ account }) => events.getAlerts(account)))
      .handleRaw("replaceAlerts", ({ request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* CurrentUser
          // As for credits (D6): checked right after authentication, before the body is looked at.
          if (!user.is_admin) return yield* new Forbidden({ detail: "Only an administrator can change the alerts." })
          const body = yield* Effect.orDie(request.json)
          const input = yield* decodeRequest(AlertsRequest)(body)
          const saved = yield* events.replaceAlerts(account, input.thresholds, input.expected_version ?? 0)
          return yield* HttpServerResponse.schemaJson(AlertsRecord)(saved).pipe(Effect.orDie)
        }))
      .handle("listEvents", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          Effect.flatMap(
            events.page(account, {
              after: Option.fromNullable(urlParams.after),
              limit: urlParams.limit ?? DEFAULT_PAGE_SIZE,
              type: urlParams.type ?? null,
              order: urlParams.order ?? DEFAULT_EVENT_ORDER
            }),
            // Written by the catalog's schemas when appended: sent as stored, not decoded and encoded again.
            (page) => HttpServerResponse.json(page).pipe(Effect.orDie)
          )))
      .handleRaw("streamEvents", ({ request, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* CurrentUser
          const { account, user } = caller
          const lastEventId = Option.fromNullable(request.headers["last-event-id"])
          const from = Option.isSome(lastEventId)
            ? yield* events.positionAfter(account, lastEventId)
            : yield* events.newestPosition(account)
          const response = NodeHttpServerRequest.toServerResponse(request)
          // The place is freed the moment the answer ends, however it ends: the client gone, cut
          // off, or shut down. Taken and tied to the answer in one step, so no hang-up falls between.
          const leave = yield* Effect.uninterruptible(Effect.tap(hub.admit(account, user.id), (leave) =>
            Effect.sync(() => {
              if (response.closed) leave()
              else response.once("close", leave)
            })))
          // A reader that takes nothing for two heartbeats is cut off, as a stalled export is; its
          // comment lines keep a live reader's stream moving.
          cutWhenStalled(response, Duration.times(config.eventsHeartbeat, 2))
          const body = live(caller, from, urlParams.notices === "wallet").pipe(Stream.ensuring(Effect.sync(leave)))
          return HttpServerResponse.stream(body, {
            contentType: "text/event-stream",
            // Proxies that buffer (nginx) would hold events back; no-cache as SSE clients expect.
            headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
          })
        }))
  })).pipe(
    Layer.provide(AuthenticationLive),
    Layer.provide([Auth.Default, Events.Default, EventsHub.Default])
  )
