import { Effect } from "effect"
import { createConnection, createServer, type Socket } from "node:net"

/**
 * A TCP proxy in front of PostgreSQL that counts round trips as they cross the wire: each Sync
 * of the extended protocol, and each simple Query, is one round trip, logged with the text of the
 * statement it ends (the last Parse before it, or the named statement its Bind names). What a test asserts on is what the database saw,
 * not what the client meant to send.
 */
export interface CountingProxy {
  readonly port: number
  /** One entry per round trip, oldest first: the statement's text ("" for a Sync with no Parse). */
  readonly roundTrips: Array<string>
  /** The text of every statement parsed (planned anew, or prepared by name), oldest first. */
  readonly parses: Array<string>
}

/** The client's side of one connection: the startup message, then typed messages. */
const watch = (onRoundTrip: (text: string) => void, onParse: (text: string) => void) => {
  let buffer = Buffer.alloc(0)
  let started = false
  let lastParse = ""
  const prepared = new Map<string, string>()
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
        onParse(lastParse)
        if (nameEnd > 0) prepared.set(body.subarray(0, nameEnd).toString("utf8"), lastParse)
      } else if (type === "B" && lastParse === "") {
        // A named statement parsed earlier on this connection is bound by its name alone.
        const portalEnd = body.indexOf(0)
        lastParse = prepared.get(body.subarray(portalEnd + 1, body.indexOf(0, portalEnd + 1)).toString("utf8")) ?? ""
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
      const parses: Array<string> = []
      const sockets = new Set<Socket>()
      const server = createServer((client) => {
        const upstream = createConnection(target)
        sockets.add(client).add(upstream)
        const count = watch((text) => roundTrips.push(text), (text) => parses.push(text))
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
          proxy: { port, roundTrips, parses },
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
