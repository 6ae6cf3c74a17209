import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "./Config.js"
import { type Account, accountKey, isUuid } from "./Domain/Account.js"
import { EventNotFound } from "./Domain/Errors.js"
import {
  MAX_ENDPOINTS,
  ROTATION_OVERLAP_MS,
  WebhookLimitReached,
  WebhookNotFound,
  WebhookUrlRefused
} from "./Domain/Webhooks.js"
import { Events } from "./Events.js"
import { deliveryJobId, WebhookQueue } from "./Webhooks/Queue.js"
import { RedeliveryThrottle } from "./Webhooks/RedeliveryThrottle.js"
import { type EndpointRow, WebhooksRepo } from "./Webhooks/Repo.js"
import { newSecret, urlProblem } from "./Webhooks/Rules.js"

const notFound = () => new WebhookNotFound({ detail: "The account has no webhook endpoint with this id." })

/** An endpoint as answered (D17): never its secret. */
export const endpointView = (row: EndpointRow) => ({
  id: row.id,
  url: row.url,
  description: row.description,
  types: row.types,
  enabled: row.enabled,
  disabled_reason: row.disabled_reason,
  created_at: row.created_at,
  updated_at: row.updated_at
})

/** Whether an endpoint takes events of this type: `types` null is every type. */
export const takes = (endpoint: EndpointRow, type: string) => endpoint.types === null || endpoint.types.includes(type)

/** An event of the log as `Events.read` gives it. */
interface LoggedEvent {
  readonly id: string
  readonly type: string
  readonly created_at: DateTime.Utc
  readonly data: unknown
}

/** A delivery job of an event to an endpoint, the event as it is sent. */
export const deliveryOf = (event: LoggedEvent, endpoint: EndpointRow) => ({
  event_id: event.id,
  endpoint_id: endpoint.id,
  type: event.type,
  created_at: DateTime.formatIso(event.created_at),
  data: event.data
})

/**
 * Webhook endpoints (D17): an account's administrators register, change, rotate and remove them;
 * the relay (Relay.ts) hands them the account's events and the worker (Delivery.ts) sends them.
 */
export class Webhooks extends Effect.Service<Webhooks>()("Webhooks", {
  effect: Effect.gen(function*() {
    const repo = yield* WebhooksRepo
    const events = yield* Events
    const queue = yield* WebhookQueue
    const throttle = yield* RedeliveryThrottle
    const sql = yield* SqlClient.SqlClient
    const { allowInsecure } = (yield* AppConfig).webhooks

    const checkUrl = (url: string) => {
      const problem = urlProblem(url, allowInsecure)
      return problem === undefined ? Effect.void : Effect.fail(new WebhookUrlRefused({ detail: `url ${problem}` }))
    }

    const key = (account: Account, id: string) =>
      isUuid(id) ? Effect.succeed({ ...accountKey(account), id }) : Effect.fail(notFound())

    const create = Effect.fn("Webhooks.create")(function*(
      account: Account,
      input: {
        readonly url: string
        readonly types?: ReadonlyArray<string> | null
        readonly description?: string | null
      }
    ) {
      yield* checkUrl(input.url)
      const secret = newSecret()
      // The account's cursor is made (at the log's newest event) and locked first: the endpoint gets
      // what is committed after it exists, and two creations racing cannot both be the tenth.
      const position = yield* events.newestPosition(account)
      const row = yield* sql.withTransaction(Effect.gen(function*() {
        yield* repo.lockAccount({ ...accountKey(account), position })
        const { endpoints } = yield* repo.count(accountKey(account))
        if (endpoints >= MAX_ENDPOINTS) {
          return yield* new WebhookLimitReached({
            detail: `An account has at most ${MAX_ENDPOINTS} webhook endpoints; delete one first.`,
            limit: MAX_ENDPOINTS
          })
        }
        return yield* repo.insert({
          ...accountKey(account),
          url: input.url,
          description: input.description ?? null,
          types: input.types ?? null,
          secret
        })
      })).pipe(Effect.catchTag("SqlError", Effect.die))
      return { ...endpointView(row), secret }
    })

    const list = Effect.fn("Webhooks.list")(function*(account: Account) {
      return { endpoints: (yield* repo.list(accountKey(account))).map(endpointView) }
    })

    const get = Effect.fn("Webhooks.get")(function*(account: Account, id: string) {
      const found = yield* repo.find(yield* key(account, id))
      return endpointView(yield* Option.match(found, { onNone: () => Effect.fail(notFound()), onSome: Effect.succeed }))
    })

    const update = Effect.fn("Webhooks.update")(function*(
      account: Account,
      id: string,
      input: {
        readonly url?: string
        readonly types?: ReadonlyArray<string> | null
        readonly description?: string | null
        readonly enabled?: boolean
      }
    ) {
      const endpoint = yield* key(account, id)
      if (input.url !== undefined) yield* checkUrl(input.url)
      const updated = yield* repo.update({ ...endpoint, ...input })
      return endpointView(
        yield* Option.match(updated, { onNone: () => Effect.fail(notFound()), onSome: Effect.succeed })
      )
    })

    const remove = Effect.fn("Webhooks.remove")(function*(account: Account, id: string) {
      const removed = yield* repo.remove(yield* key(account, id))
      if (Option.isNone(removed)) return yield* notFound()
    })

    const rotate = Effect.fn("Webhooks.rotate")(function*(account: Account, id: string) {
      const secret = newSecret()
      const rotated = yield* repo.rotate({ ...(yield* key(account, id)), secret, overlap_ms: ROTATION_OVERLAP_MS })
      return yield* Option.match(rotated, {
        onNone: () => Effect.fail(notFound()),
        onSome: ({ previous_secret_until }) =>
          Effect.succeed({ secret, previous_secret_expires_at: previous_secret_until })
      })
    })

    const deliveries = Effect.fn("Webhooks.deliveries")(function*(account: Account, id: string, limit: number) {
      yield* get(account, id)
      return { deliveries: yield* repo.deliveries({ endpoint_id: id, limit }) }
    })

    /**
     * Queues the event again to the account's enabled endpoints whose types match. A job id of its
     * own (the pair and a fresh suffix), so it is sent even where the first delivery's job is still kept.
     * Counted before anything is read: a refused call costs a script and queues nothing.
     */
    const redeliver = Effect.fn("Webhooks.redeliver")(function*(account: Account, eventId: string) {
      yield* throttle.take(account)
      const position = yield* events.positionAfter(account, Option.some(eventId))
      const [event] = yield* events.read(account, { position: position - 1, type: null, limit: 1 })
      if (event === undefined) return yield* new EventNotFound({ detail: "No event of this account has the id given." })
      const endpoints = (yield* repo.enabledOf([accountKey(account)])).filter((endpoint) => takes(endpoint, event.type))
      const again = randomUUID()
      yield* queue.add(endpoints.map((endpoint) => ({
        id: `${deliveryJobId(event.id, endpoint.id)}.${again}`,
        job: deliveryOf(event, endpoint)
      }))).pipe(Effect.orDie)
      return { event_id: event.id, endpoints: endpoints.length }
    })

    return { create, list, get, update, remove, rotate, deliveries, redeliver } as const
  }),
  dependencies: [WebhooksRepo.Default, Events.Default, WebhookQueue.Default, RedeliveryThrottle.Default]
}) {}
