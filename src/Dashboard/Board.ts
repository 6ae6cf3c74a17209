import { createBullBoard } from "@bull-board/api"
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter"
import { HonoAdapter } from "@bull-board/hono"
import { serveStatic } from "@hono/node-server/serve-static"
import { Effect } from "effect"
import { Hono } from "hono"
import { SettlementQueue } from "../Settlement/Queue.js"

/** A path segment as bull-board's router reads it; a malformed escape matches no route. */
const decodeSegment = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return ""
  }
}

/** Where the queue dashboard is served (D9). */
export const DASHBOARD_PATH = "/admin/queues"

/**
 * bull-board over the `settlement` queue (D9), as a web handler for the HTTP
 * server to mount behind its admin check.
 */
export class QueueDashboard extends Effect.Service<QueueDashboard>()("Dashboard/QueueDashboard", {
  scoped: Effect.gen(function*() {
    const queue = yield* SettlementQueue

    const serverAdapter = new HonoAdapter(serveStatic).setBasePath(DASHBOARD_PATH)
    createBullBoard({
      // Not bull-board's readOnlyMode, which refuses retries too: `allows` below keeps the board read-only.
      queues: [new BullMQAdapter(queue, { readOnlyMode: false, allowRetries: true })],
      serverAdapter,
      options: {
        uiConfig: {
          boardTitle: "Account API queues",
          miscLinks: [{ text: "Sign out", url: `${DASHBOARD_PATH}/logout` }]
        }
      }
    })
    const app = new Hono().route(DASHBOARD_PATH, serverAdapter.registerPlugin())

    /**
     * What the board may do (D9): read, and retry failed jobs, one or all. Every
     * other write of bull-board's API (add, edit, clean, pause, empty,
     * obliterate, promote, schedulers, rate limits) is refused before it runs.
     */
    const allows = (method: string, path: string): Effect.Effect<boolean> => {
      if (method === "GET" || method === "HEAD") return Effect.succeed(true)
      if (method !== "PUT") return Effect.succeed(false)
      const api = path.startsWith(`${DASHBOARD_PATH}/api/queues/`)
        ? path.slice(DASHBOARD_PATH.length + 12).split("/")
        : []
      const [queueName, jobId, action, ...rest] = api.map(decodeSegment)
      if (queueName !== queue.name || rest.length > 0) return Effect.succeed(false)
      if (jobId === "retry") return Effect.succeed(action === "failed")
      if (jobId === undefined || action !== "retry") return Effect.succeed(false)
      // A completed job retried would only answer `duplicate`, but the role is to retry failures.
      return Effect.promise(() => queue.getJobState(jobId)).pipe(
        Effect.map((state) => state === "failed"),
        Effect.orElseSucceed(() => false)
      )
    }

    return {
      allows,
      fetch: (request: Request): Promise<Response> => Promise.resolve(app.fetch(request))
    } as const
  }),
  dependencies: [SettlementQueue.Default]
}) {}
