import { connect, type Socket } from "node:net"

/** HTTP as an attacker or a broken client speaks it: one raw socket per request. */

export interface RawReader {
  /** The status line's code, once the head has arrived (0 when the socket ended first). */
  readonly status: Promise<number>
  /** The head and what was read of the body so far. */
  readonly received: () => string
  /** Settles when the socket closes; `aborted` when the server cut it before a complete chunked body. */
  readonly closed: Promise<{ readonly aborted: boolean }>
  /** Reads on as fast as the answer comes. */
  readonly resume: () => void
  readonly destroy: () => void
}

/**
 * A GET whose answer is read `bytesPerSecond` bytes a second once its head has arrived
 * (0: never read again). The socket stays paused in between, so the kernel's buffers fill and
 * the server's writes wait, as behind a slow or stalled client.
 */
export const slowGet = (
  port: number,
  path: string,
  options: { readonly token: string; readonly bytesPerSecond: number }
): RawReader => {
  const socket: Socket = connect({ host: "127.0.0.1", port })
  let text = ""
  let resolveStatus: (status: number) => void = () => {}
  const status = new Promise<number>((resolve) => {
    resolveStatus = resolve
  })
  let timer: NodeJS.Timeout | undefined
  const onHead = (chunk: Buffer) => {
    text += chunk.toString("latin1")
    const match = /^HTTP\/1\.1 (\d{3})/.exec(text)
    if (match === null && text.length < 16) return
    resolveStatus(Number(match?.[1] ?? 0))
    socket.off("data", onHead)
    socket.pause()
    if (options.bytesPerSecond > 0) {
      timer = setInterval(() => {
        const read: Buffer | null = socket.read(options.bytesPerSecond)
        if (read !== null) text += read.toString("latin1")
      }, 1000)
    }
  }
  socket.on("data", onHead)
  socket.on("error", () => {})
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${options.token}\r\nConnection: close\r\n\r\n`
  )
  const closed = new Promise<{ readonly aborted: boolean }>((resolve) => {
    socket.once("close", () => {
      if (timer !== undefined) clearInterval(timer)
      resolveStatus(0)
      resolve({ aborted: !isCompleteChunkedBody(text) })
    })
  })
  return {
    status,
    received: () => text,
    closed,
    resume: () => {
      if (timer !== undefined) clearInterval(timer)
      socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")))
      socket.resume()
    },
    destroy: () => {
      if (timer !== undefined) clearInterval(timer)
      socket.destroy()
    }
  }
}

/** Whether a response read whole ends as a chunked body ends: with the last, empty chunk. */
const isCompleteChunkedBody = (text: string) => text.endsWith("\r\n0\r\n\r\n")

/**
 * A GET read to the end as fast as it comes, on a socket of its own: its status, its body (chunked
 * transfer coding removed), and whether the body arrived whole or the connection was cut first.
 */
export const fullGet = (port: number, path: string, token: string) =>
  new Promise<{ readonly status: number; readonly body: string; readonly complete: boolean }>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("error", () => {})
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`
    )
    socket.once("close", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const [head = "", ...rest] = text.split("\r\n\r\n")
      const raw = rest.join("\r\n\r\n")
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0)
      if (!/transfer-encoding: chunked/i.test(head)) {
        resolve({ status, body: raw, complete: true })
        return
      }
      let body = ""
      let at = 0
      for (;;) {
        const end = raw.indexOf("\r\n", at)
        if (end < 0) return resolve({ status, body, complete: false })
        const size = parseInt(raw.slice(at, end), 16)
        if (Number.isNaN(size)) return resolve({ status, body, complete: false })
        if (size === 0) return resolve({ status, body, complete: raw.slice(end + 2) === "\r\n" })
        // Sizes count bytes; the body here is ASCII (CSV of ids, numbers and plain notes).
        body += raw.slice(end + 2, end + 2 + size)
        at = end + 2 + size + 2
        if (at > raw.length) return resolve({ status, body, complete: false })
      }
    })
  })
