import { createBullBoard } from "@bull-board/api"
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter"
import type { IServerAdapter } from "@bull-board/api/typings/app"
import { HonoAdapter } from "@bull-board/hono"
import { serveStatic } from "@hono/node-server/serve-static"
import { Queue } from "bullmq"
import { Effect } from "effect"
import { Hono } from "hono"
import { bullConnection } from "../Settlement/Connection.js"
import { SETTLEMENT_QUEUE } from "../Settlement/Jobs.js"

/** Where the queue dashboard is served (D9). */
export const DASHBOARD_PATH = "/admin/queues"

/**
 * bull-board over the `settlement` queue (D9), as a web handler for the HTTP
 * server to mount behind its admin check. It has a queue of its own, closed on
 * shutdown after the server stops taking requests.
 */
export class QueueDashboard extends Effect.Service<QueueDashboard>()("Dashboard/QueueDashboard", {
  scoped: Effect.gen(function*() {
    const { connection, prefix } = yield* bullConnection
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(SETTLEMENT_QUEUE, { connection, prefix })),
      (queue) => Effect.promise(() => queue.close())
    )
    // A Redis outage is reported by the dashboard's own requests; an unheard error event would crash the process.
    queue.on("error", () => {})

    const serverAdapter = new HonoAdapter(serveStatic).setBasePath(DASHBOARD_PATH)
    createBullBoard({
      queues: [new BullMQAdapter(queue, { readOnlyMode: false })],
      // The latest hono adapter (9.10.1) is typed against its own copy of @bull-board/api 9.10.1: the same
      // interface, but TypeScript tells the two copies' private members apart.
      serverAdapter: serverAdapter as unknown as IServerAdapter,
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
  })
}) {}
