import { createBullBoard } from "@bull-board/api"
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter"
import { HonoAdapter } from "@bull-board/hono"
import { serveStatic } from "@hono/node-server/serve-static"
import { Effect } from "effect"
import { Hono } from "hono"
import { SettlementQueue } from "../Settlement/Queue.js"

/** Where the queue dashboard is served (D9). */
export const DASHBOARD_PATH = "/admin/queues"

/**
 * bull-board over the `settlement` queue (D9), as a web handler for the HTTP
 * server to mount behind its admin check.
 */
export class QueueDashboard extends Effect.Service<QueueDashboard>()("Dashboard/QueueDashboard", {
  scoped: Effect.gen(function*() {
    const queue = yield* SettlementQueue
    // A Redis outage is reported by the dashboard's own requests; an unheard error event would crash the process.
    queue.on("error", () => {})

    const serverAdapter = new HonoAdapter(serveStatic).setBasePath(DASHBOARD_PATH)
    createBullBoard({
      queues: [new BullMQAdapter(queue, { readOnlyMode: false })],
      serverAdapter,
      options: {
        uiConfig: {
          boardTitle: "Account API queues",
          miscLinks: [{ text: "Sign out", url: `${DASHBOARD_PATH}/logout` }]
        }
      }
    })
    const app = new Hono().route(DASHBOARD_PATH, serverAdapter.registerPlugin())

    return {
      fetch: (request: Request): Promise<Response> => Promise.resolve(app.fetch(request))
    } as const
  }),
  dependencies: [SettlementQueue.Default]
}) {}
