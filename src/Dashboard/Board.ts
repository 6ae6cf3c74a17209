import type { Queue } from "bullmq"
import { Effect } from "effect"
import type { Hono } from "hono"
import { SettlementQueue } from "../Settlement/Queue.js"

/** A path segment as bull-board's router reads it; a malformed escape matches no route. */
const decodeSegment = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return ""
  }
}

/**
 * The path a request target leads to on the board, as its router reads it: the request handed
 * to the board is built with WHATWG URL parsing, which drops a `#…` fragment, turns `\` into
 * `/` and resolves dot segments, so `…/settlement/pause#/retry` is a pause there. None where that
 * path is not the target's path read plainly, and for percent-encoded `#`, `\` and dots: the
 * allow-list decides on the path the board routes on, and a target that two readings could
 * disagree on is refused (D9).
 */
export const boardPathOf = (target: string): string | undefined => {
  const raw = target.split("?")[0] ?? ""
  if (/%(?:23|5c|2e)/i.test(raw)) return undefined
  let parsed: URL
  try {
    parsed = new URL(target, "http://board.invalid")
  } catch {
    return undefined
  }
  return parsed.origin === "http://board.invalid" && parsed.hash === "" && parsed.pathname === raw
    ? parsed.pathname
    : undefined
}

/**
 * What an operator may not do is not drawn either (D9): the board is read-only but for retrying
 * failed jobs, and bull-board's own options cannot say so (its per-queue `readOnlyMode` hides
 * and refuses retries too). So its pages get this stylesheet, which hides, by the class names of
 * the pinned @bull-board/ui 9.10.1: the queue's action menu (add job, pause, resume, empty,
 * obliterate, concurrency, rate limit), every per-status action but "Retry all" (clean all,
 * promote all) and every per-job action but retry (promote, duplicate, edit data, reschedule,
 * reprioritise, clean), the queue-info dialog's edit buttons (concurrency, rate limit), and the
 * overview menu's "Pause all" and "Resume all"; the rate-limit badge stays, but releases nothing
 * when clicked. Retry is the `lucide-refresh-cw` icon. The allow-list still refuses all of these
 * if sent anyway.
 */
export const OPERATOR_STYLESHEET = `${
  [
    ".trigger-GNtOnV",
    ".editButton-Pj_Zdd",
    ".queueActions-dnGfku > li:not(:has(svg.lucide-refresh-cw))",
    ".jobActions-XfoQK8 > li:not(:has(svg.lucide-refresh-cw))",
    "[role=\"menuitem\"]:has(svg.lucide-pause, svg.lucide-play)"
  ].join(",\n")
} { display: none !important; }
.badge-EpS59S { pointer-events: none; }`

/** The board's HTML page with the operator's stylesheet; anything else as the board answered it. */
const withOperatorStylesheet = async (response: Response): Promise<Response> => {
  if (!(response.headers.get("content-type") ?? "").startsWith("text/html")) return response
  const html = await response.text()
  const headers = new Headers(response.headers)
  headers.delete("content-length")
  return new Response(
    html.replace("</head>", `<style id="operator-role">${OPERATOR_STYLESHEET}</style></head>`),
    { status: response.status, statusText: response.statusText, headers }
  )
}

/** The allow-list's answer: `ambiguous` is a target whose path two readings could disagree on. */
export type BoardVerdict = "allowed" | "refused" | "ambiguous"

/** Where the queue dashboard is served (D9). */
export const DASHBOARD_PATH = "/admin/queues"

/**
 * bull-board over the queue, as a Hono app under DASHBOARD_PATH. Imported when the board is
 * first asked for, not at start-up: bull-board, its UI's server, its schema library and lodash
 * (through its Redis statistics) are ~3 MB of module sources, and every API process would hold
 * them for a page operators open now and then.
 */
const loadBoard = async (queue: Queue): Promise<Hono> => {
  const [{ createBullBoard }, { BullMQAdapter }, { HonoAdapter }, { serveStatic }, { Hono }] = await Promise.all([
    import("@bull-board/api"),
    import("@bull-board/api/bullMQAdapter"),
    import("@bull-board/hono"),
    import("@hono/node-server/serve-static"),
    import("hono")
  ])
  const serverAdapter = new HonoAdapter(serveStatic).setBasePath(DASHBOARD_PATH)
  // bull-board's adapters read `allowCompletedRetries`, which BullMQAdapter's declared options omit.
  const adapterOptions: NonNullable<ConstructorParameters<typeof BullMQAdapter>[1]> & {
    readonly allowCompletedRetries: boolean
  } = {
    readOnlyMode: false,
    allowRetries: true,
    allowCompletedRetries: false
  }
  createBullBoard({
    // Not bull-board's readOnlyMode, which refuses retries too: `allows` below keeps the board read-only.
    // Only the settlement queue: housekeeping runs on a queue of its own, which operators do not read.
    // Retries of failed jobs only: a completed job retried would only answer `duplicate`.
    queues: [new BullMQAdapter(queue, adapterOptions)],
    serverAdapter,
    options: {
      uiConfig: {
        boardTitle: "Account API queues",
        // The stylesheet above finds "Retry all" by its icon, not its words, but the pages stay in one language.
        locale: { lng: "en-US" },
        miscLinks: [{ text: "Sign out", url: `${DASHBOARD_PATH}/logout` }]
      }
    }
  })
  return new Hono().route(DASHBOARD_PATH, serverAdapter.registerPlugin())
}

/**
 * bull-board over the `settlement` queue (D9), as a web handler for the HTTP
 * server to mount behind its admin check.
 */
export class QueueDashboard extends Effect.Service<QueueDashboard>()("Dashboard/QueueDashboard", {
  scoped: Effect.gen(function*() {
    const queue = yield* SettlementQueue
    // Loaded once, by the first request; a failed load is tried again by the next.
    let board: Promise<Hono> | undefined
    const boardApp = () => {
      board ??= loadBoard(queue).catch((error: unknown) => {
        board = undefined
        throw error
      })
      return board
    }

    /**
     * What the board may do (D9): read, and retry failed jobs, one or all. Every
     * other write of bull-board's API (add, edit, clean, pause, empty,
     * obliterate, promote, schedulers, rate limits) is refused before it runs.
     * Decided on the path the board will route the request on, never the raw target.
     */
    const allows = (method: string, target: string): Effect.Effect<BoardVerdict> => {
      const path = boardPathOf(target)
      if (path === undefined) return Effect.succeed("ambiguous")
      if (method === "GET" || method === "HEAD") return Effect.succeed("allowed")
      if (method !== "PUT") return Effect.succeed("refused")
      const verdict = (allowed: boolean): BoardVerdict => allowed ? "allowed" : "refused"
      const api = path.startsWith(`${DASHBOARD_PATH}/api/queues/`)
        ? path.slice(DASHBOARD_PATH.length + 12).split("/")
        : []
      const [queueName, jobId, action, ...rest] = api.map(decodeSegment)
      if (queueName !== queue.name || rest.length > 0) return Effect.succeed("refused")
      if (jobId === "retry") return Effect.succeed(verdict(action === "failed"))
      if (jobId === undefined || action !== "retry") return Effect.succeed("refused")
      // A completed job retried would only answer `duplicate`, but the role is to retry failures.
      return Effect.promise(() => queue.getJobState(jobId)).pipe(
        Effect.map((state) => verdict(state === "failed")),
        Effect.orElseSucceed(() => "refused" as const)
      )
    }

    return {
      allows,
      fetch: (request: Request): Promise<Response> =>
        boardApp().then((app) => app.fetch(request)).then(withOperatorStylesheet)
    } as const
  }),
  dependencies: [SettlementQueue.Default]
}) {}
