/**
 * A server-sent events parser as the HTML standard's "event stream interpretation" reads a stream:
 * lines end in CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the next
 * are one line end), `:` starts a comment, `data:` lines join with LF, a blank line dispatches,
 * and `id:` sets the last event id even on a message without data. Fed text as it arrives, so
 * it works on any chunking of the body.
 */

export interface SseMessage {
  /** The `event:` field; `message` when the server sent none. */
  readonly event: string
  readonly data: string
  /** The last event id as of this message (the stream's, carried over from earlier messages). */
  readonly lastEventId: string
}

export interface SseParser {
  /** The messages that the text completes, in order. */
  readonly push: (text: string) => ReadonlyArray<SseMessage>
  /** The last `retry:` the server sent, in milliseconds. */
  readonly retryMs: () => number | undefined
}

export const sseParser = (): SseParser => {
  let buffered = ""
  // A CR ended the previous chunk: an LF starting this one belongs to that line end.
  let skipLf = false
  let data: Array<string> = []
  let event = ""
  let lastEventId = ""
  let retry: number | undefined

  const line = (text: string, out: Array<SseMessage>) => {
    if (text === "") {
      if (data.length > 0) out.push({ event: event === "" ? "message" : event, data: data.join("\n"), lastEventId })
      data = []
      event = ""
      return
    }
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? "" : text.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "data") data.push(value)
    else if (field === "event") event = value
    else if (field === "id" && !value.includes("\u0000")) lastEventId = value
    else if (field === "retry" && /^\d+$/.test(value)) retry = Number(value)
  }

  return {
    push: (text) => {
      const out: Array<SseMessage> = []
      let rest = text
      if (skipLf && rest.startsWith("\n")) rest = rest.slice(1)
      skipLf = false
      buffered += rest
      for (let end = buffered.search(/[\r\n]/); end !== -1; end = buffered.search(/[\r\n]/)) {
        const current = buffered.slice(0, end)
        if (buffered[end] === "\r") {
          if (end + 1 === buffered.length) {
            skipLf = true
            buffered = ""
          } else {
            buffered = buffered.slice(buffered[end + 1] === "\n" ? end + 2 : end + 1)
          }
        } else {
          buffered = buffered.slice(end + 1)
        }
        line(current, out)
      }
      return out
    },
    retryMs: () => retry
  }
}
