import { Either, Schema } from "effect"
import { type Catalog, Event, type EventType, WALLET_CHANGED_NOTICE } from "../../../src/Domain/Events.js"
import { sseParser } from "./Sse.js"

/**
 * Events (D17) as clients read them: the wire's JSON (`{ id, type, created_at, data }`, amounts
 * decimal strings, times ISO 8601), checked against the catalog's schema of its type, and the
 * live stream's reconnecting reader. Only `fetch`, `TextDecoder` and `AbortController`: Node 20.19
 * and later, and browsers.
 */

/** The event of one type, as the wire carries it: its `data` is the catalog's schema of that type, encoded. */
export interface AccountEventOf<T extends EventType> {
  readonly id: string
  readonly type: T
  /** ISO 8601. */
  readonly created_at: string
  readonly data: Schema.Schema.Encoded<Catalog[T]["data"]>
}

/** An event as the pull, the stream and a webhook's body carry it; `type` narrows `data`. */
export type AccountEvent = { readonly [T in EventType]: AccountEventOf<T> }[EventType]
export type { EventType }

/** A page of the pull: `next_after` is the next page's `after`, null when this one reached the newest event. */
export interface AccountEventPage {
  readonly events: ReadonlyArray<AccountEvent>
  readonly next_after: string | null
}

const decodeEvent = Schema.decodeUnknownEither(Event)

/**
 * The value as an event of the catalog, as sent: the full schema checks it (dates, amounts, each
 * type's data), and the wire's own JSON is what callers get, as every answer of the client.
 */
export const checkEvent = (value: unknown): Either.Either<AccountEvent, string> => {
  const decoded = decodeEvent(value)
  if (Either.isLeft(decoded)) return Either.left(decoded.left.message)
  return isAccountEvent(value) ? Either.right(value) : Either.left("not an event as the wire carries it")
}

/** Decoded by the contract's `Event` just before: what remains is that the wire's JSON is that event's encoded form. */
const isAccountEvent = (value: unknown): value is AccountEvent =>
  typeof value === "object" && value !== null && "id" in value && typeof value.id === "string" &&
  "created_at" in value && typeof value.created_at === "string" && "data" in value &&
  Either.isRight(decodeEvent(value))

export interface StreamOptions {
  /**
   * Resume after this event (`Last-Event-ID`): every event committed after it, from the log, then
   * live. Without it the stream starts with the next event committed after it opens.
   */
  readonly lastEventId?: string
  /** Aborting it ends the iteration (cleanly, no error) and closes the connection. */
  readonly signal?: AbortSignal
  /**
   * Asks the stream for the wallet's change notices too (`notices=wallet`, D17): called at most
   * every 250 ms after the account's wallet was written (a reserve, a spend, a release, an
   * expiry, a budget, a credit), and once after each reconnection, since a change may have come
   * meanwhile. Not an event: nothing is yielded for it. Read the wallet (and sessions, limits) then.
   */
  readonly onWalletChanged?: () => void
  /**
   * A connection that receives nothing (not even the comment the service sends every
   * `EVENTS_HEARTBEAT_MS`, 15 s) for this long is taken as dead and opened again; 45 s when omitted.
   */
  readonly idleTimeoutMs?: number
  /** The first wait before reconnecting, doubled after each failed attempt; the client's `retry.baseDelayMs` when omitted. */
  readonly baseDelayMs?: number
  /** No wait between attempts is longer; the client's `retry.maxDelayMs` when omitted. */
  readonly maxDelayMs?: number
}

/** A connection's answer that is not the stream: thrown when it will not change by asking again. */
export interface StreamRefusal {
  readonly status: number
  readonly text: string
  readonly retryAfterSeconds: number | undefined
}

export interface StreamConnection {
  readonly url: string
  readonly headers: () => Record<string, string>
  /** Decides what an answer other than 200 means: a thrown error ends the iteration, else it reconnects. */
  readonly refused: (refusal: StreamRefusal) => void
  readonly baseDelayMs: number
  readonly maxDelayMs: number
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export const pause = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted === true) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener("abort", done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener("abort", done, { once: true })
  })

/**
 * The live stream as an async iterator. Each event is yielded once, in the log's order: after a
 * dropped connection (the network, a process that stopped or was killed, a stream that went
 * quiet for `idleTimeoutMs`) it connects again with `Last-Event-ID` set to the last event
 * yielded, and the service sends what the log holds after it. It waits between attempts (full
 * jitter, doubling up to `maxDelayMs`, or the service's `Retry-After`); the first reconnection
 * after a connection that worked waits only the base delay.
 */
export async function* readStream(connection: StreamConnection, options: StreamOptions): AsyncGenerator<AccountEvent> {
  const { signal } = options
  const idleTimeoutMs = options.idleTimeoutMs ?? 45_000
  let base = options.baseDelayMs ?? connection.baseDelayMs
  const max = options.maxDelayMs ?? connection.maxDelayMs
  let last = options.lastEventId
  let failures = 0
  let connections = 0
  // A function, not the property: the signal aborts while this awaits.
  const stopped = () => signal?.aborted === true
  while (!stopped()) {
    const abort = new AbortController()
    const stop = () => abort.abort()
    signal?.addEventListener("abort", stop, { once: true })
    let idle: ReturnType<typeof setTimeout> | undefined
    const touch = () => {
      clearTimeout(idle)
      idle = setTimeout(() => abort.abort(new Error(`nothing received for ${idleTimeoutMs} ms`)), idleTimeoutMs)
    }
    let waitMs: number | undefined
    try {
      touch()
      const response = await fetch(connection.url, {
        headers: {
          ...connection.headers(),
          accept: "text/event-stream",
          ...(last === undefined ? {} : { "last-event-id": last })
        },
        signal: abort.signal
      })
      if (response.status !== 200 || response.body === null) {
        const after = Number(response.headers.get("retry-after"))
        const retryAfterSeconds = Number.isInteger(after) && after > 0 ? after : undefined
        connection.refused({ status: response.status, text: await response.text(), retryAfterSeconds })
        if (retryAfterSeconds !== undefined) waitMs = Math.min(max, retryAfterSeconds * 1000)
      } else {
        // A change notice may have gone unsent while no connection was open.
        if (connections++ > 0) options.onWalletChanged?.()
        failures = 0
        const parser = sseParser()
        const decoder = new TextDecoder()
        const reader = response.body.getReader()
        try {
          for (;;) {
            const chunk = await reader.read()
            if (chunk.done) break
            touch()
            for (const message of parser.push(decoder.decode(chunk.value, { stream: true }))) {
              if (message.event === WALLET_CHANGED_NOTICE) {
                options.onWalletChanged?.()
                continue
              }
              let json: unknown
              try {
                json = JSON.parse(message.data)
              } catch {
                throw new Error(`the event stream sent data that is not JSON: ${message.data.slice(0, 200)}`)
              }
              const event = checkEvent(json)
              if (Either.isLeft(event)) {
                throw new Error(`the event stream sent an event off the contract: ${event.left}`)
              }
              // The log resumes strictly after Last-Event-ID; this only guards against a server that would not.
              if (event.right.id === last) continue
              last = event.right.id
              // The caller's time with the event is not the connection's silence.
              clearTimeout(idle)
              yield event.right
              touch()
            }
          }
        } finally {
          reader.cancel().catch(() => {})
        }
        const retry = parser.retryMs()
        if (retry !== undefined) base = retry
      }
    } catch (error) {
      // Ours to throw (a refusal, an event off the contract), or the caller left: end here.
      if (!abort.signal.aborted && !(error instanceof TypeError)) throw error
      if (stopped()) return
    } finally {
      clearTimeout(idle)
      signal?.removeEventListener("abort", stop)
      abort.abort()
    }
    if (stopped()) return
    // A connection that worked and ended (a process stopping ends its streams) is opened again soon.
    const backoff = Math.min(max, base * 2 ** failures)
    failures += 1
    await pause(waitMs ?? Math.round(backoff / 2 + Math.random() * backoff / 2), signal)
  }
}
