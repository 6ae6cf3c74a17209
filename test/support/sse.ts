import { Effect } from "effect"

/** The live event stream (D17) read as a client reads it: `fetch`, its SSE frames parsed as they arrive. */

/** What the stream sent: events, and the comments between them. */
export interface Frame {
  readonly id?: string
  readonly event?: string
  readonly data?: string
  readonly comment?: string
  /** When the reader got it (performance.now()). */
  readonly at: number
}

export interface Reader {
  readonly status: number
  readonly contentType: string
  readonly retryAfter: string | null
  /** The problem document of a refusal (any status but 200); undefined for a stream. */
  readonly problem: Record<string, unknown> | undefined
  readonly frames: Array<Frame>
  /** Set once the server ended the stream (or the connection broke). */
  readonly ended: () => boolean
  readonly close: () => void
}

/** Opens the stream with fetch and parses SSE frames as they arrive, until closed. */
export const openStream = (port: number, token: string, lastEventId?: string) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<Reader> => {
      const abort = new AbortController()
      const response = await fetch(`http://127.0.0.1:${port}/developer/account/events/stream`, {
        headers: {
          authorization: `Bearer ${token}`,
          accept: "text/event-stream",
          ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId })
        },
        signal: abort.signal
      })
      const frames: Array<Frame> = []
      let ended = false
      const problem = response.status === 200 ? undefined : await response.json() as Record<string, unknown>
      const body = response.status === 200 ? response.body : null
      if (body !== null) {
        void (async () => {
          const decoder = new TextDecoder()
          let buffered = ""
          try {
            for await (const chunk of body) {
              buffered += decoder.decode(chunk, { stream: true })
              for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
                const block = buffered.slice(0, end)
                buffered = buffered.slice(end + 2)
                const frame: Record<string, string> = {}
                for (const line of block.split("\n")) {
                  if (line.startsWith(":")) frame.comment = line.slice(1).trim()
                  else {
                    const colon = line.indexOf(":")
                    frame[line.slice(0, colon)] = line.slice(colon + 1).trimStart()
                  }
                }
                frames.push({ ...frame, at: performance.now() })
              }
            }
          } catch {
            // Aborted by the test, or cut by the server.
          } finally {
            ended = true
          }
        })()
      }
      return {
        status: response.status,
        contentType: response.headers.get("content-type") ?? "",
        retryAfter: response.headers.get("retry-after"),
        problem,
        frames,
        ended: () => ended,
        close: () => abort.abort()
      }
    }),
    (reader) => Effect.sync(reader.close)
  )

export const eventsOf = (reader: Reader) => reader.frames.filter((frame) => frame.id !== undefined)
