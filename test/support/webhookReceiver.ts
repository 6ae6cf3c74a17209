import { Effect } from "effect"
import { createServer, type IncomingMessage } from "node:http"
import { Webhook } from "standardwebhooks"

/** A request the receiver got: its path, headers and body as sent, and when it arrived (ms since the epoch). */
export interface Received {
  readonly path: string
  readonly at: number
  readonly headers: Record<string, string>
  readonly body: string
}

/**
 * A real HTTP receiver: answers each path by its script (a status per attempt, the last one
 * repeated; 204 when unscripted), with the headers given for the path, and keeps every request it got.
 */
export const receiver = Effect.acquireRelease(
  Effect.async<{
    readonly url: (path: string) => string
    readonly received: Array<Received>
    readonly script: Map<string, Array<number>>
    readonly answerHeaders: Map<string, Record<string, string>>
    readonly close: () => Promise<void>
  }>((resume) => {
    const received: Array<Received> = []
    const script = new Map<string, Array<number>>()
    const answerHeaders = new Map<string, Record<string, string>>()
    const server = createServer((request: IncomingMessage, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const path = request.url ?? "/"
        const headers = Object.fromEntries(
          Object.entries(request.headers).flatMap(([name, value]) => typeof value === "string" ? [[name, value]] : [])
        )
        received.push({ path, at: Date.now(), headers, body: Buffer.concat(chunks).toString("utf8") })
        const statuses = script.get(path) ?? []
        const status = statuses.length > 1 ? statuses.shift() ?? 204 : statuses[0] ?? 204
        response.writeHead(status, answerHeaders.get(path) ?? {}).end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({
        url: (path: string) => `http://127.0.0.1:${port}${path}`,
        received,
        script,
        answerHeaders,
        close: () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve())
            server.closeAllConnections()
          })
      }))
    })
  }),
  (server) => Effect.promise(server.close)
)

/** Verifies a delivery as a receiver does, with the official package; the parsed body, or the reason it failed. */
export const verify = (secret: string, delivery: Omit<Received, "at">) => {
  try {
    return new Webhook(secret).verify(delivery.body, delivery.headers) as { type: string }
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}
