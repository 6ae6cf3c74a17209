import { Effect } from "effect"
import { createConnection, createServer, type Socket } from "node:net"

/**
 * A TCP proxy in front of PostgreSQL that counts round trips as they cross the wire: each Sync
 * of the extended protocol, and each simple Query, is one round trip, logged with the text of the
 * statement it ends (the last Parse before it). What a test asserts on is what the database saw,
 * not what the client meant to send.
 */
export interface CountingProxy {
  readonly port: number
  /** One entry per round trip, oldest first: the statement's text ("" for a Sync with no Parse). */
  readonly roundTrips: Array<string>
}

/** The client's side of one connection: the startup message, then typed messages. */
const watch = (onRoundTrip: (text: string) => void) => {
  let buffer = Buffer.alloc(0)
  let started = false
  let lastParse = ""
  return (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk])
    for (;;) {
      if (!started) {
        if (buffer.length < 4) return
        const length = buffer.readInt32BE(0)
        if (buffer.length < length) return
        const code = buffer.readInt32BE(4)
        buffer = buffer.subarray(length)
        // An SSL or GSS request is answered "N" and followed by the real startup message.
        if (code !== 80877103 && code !== 80877104) started = true
        continue
      }
      if (buffer.length < 5) return
      const type = String.fromCharCode(buffer[0] ?? 0)
      const length = buffer.readInt32BE(1)
      if (buffer.length < 1 + length) return
      const body = buffer.subarray(5, 1 + length)
      buffer = buffer.subarray(1 + length)
      if (type === "P") {
        const nameEnd = body.indexOf(0)
        lastParse = body.subarray(nameEnd + 1, body.indexOf(0, nameEnd + 1)).toString("utf8")
      } else if (type === "S") {
        onRoundTrip(lastParse)
        lastParse = ""
      } else if (type === "Q") {
        onRoundTrip(body.subarray(0, body.length - 1).toString("utf8"))
      }
    }
  }
}

export const countingProxy = (target: { readonly host: string; readonly port: number }) =>
  Effect.acquireRelease(
    Effect.async<{ readonly proxy: CountingProxy; readonly close: () => Promise<void> }>((resume) => {
      const roundTrips: Array<string> = []
      const sockets = new Set<Socket>()
      const server = createServer((client) => {
        const upstream = createConnection(target)
        sockets.add(client).add(upstream)
        const count = watch((text) => roundTrips.push(text))
        client.on("data", (chunk: Buffer) => {
          count(chunk)
          upstream.write(chunk)
        })
        upstream.on("data", (chunk: Buffer) => client.write(chunk))
        const end = () => {
          client.destroy()
          upstream.destroy()
        }
        client.on("close", end).on("error", end)
        upstream.on("close", end).on("error", end)
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({
          proxy: { port, roundTrips },
          close: () =>
            new Promise<void>((resolve) => {
              for (const socket of sockets) socket.destroy()
              server.close(() => resolve())
            })
        }))
      })
    }),
    ({ close }) => Effect.promise(close)
  ).pipe(Effect.map(({ proxy }) => proxy))
