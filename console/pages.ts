/**
 * The console's pages, in the navigation's order: one entry per page, one file per page under
 * `pages/`. An `admin` page (the forms: budget, credit, limits, alerts, webhooks, policy) is
 * listed under "Settings" and shown to the account's administrators only (`is_admin` from
 * `/auth/me`); a member who opens its address gets a plain "for administrators" note, never a
 * broken page. A `readable` admin page (time zone, limits, alerts, policy, repositories: what any
 * member may read) is listed to members too, beside their pages, and shows them its content
 * without its forms.
 * Add a page by adding its entry here: the router (main.tsx) and the navigation
 * (components/Shell.tsx) read this list alone.
 */
import type { ComponentType } from "preact"
import { Alerts } from "./pages/Alerts.js"
import { Budget } from "./pages/Budget.js"
import { Credit } from "./pages/Credit.js"
import { Grants } from "./pages/Grants.js"
import { Ledger } from "./pages/Ledger.js"
import { Limits } from "./pages/Limits.js"
import { Overview } from "./pages/Overview.js"
import { Policy } from "./pages/Policy.js"
import { Repositories } from "./pages/Repositories.js"
import { Sessions } from "./pages/Sessions.js"
import { Spend } from "./pages/Spend.js"
import { TimeZone } from "./pages/TimeZone.js"
import { Webhooks } from "./pages/Webhooks.js"

export interface PageEntry {
  /** The page's address after `#/`: `overview` is `/console#/overview`. */
  readonly path: string
  readonly title: string
  /** Listed under "Settings" and shown only to administrators. */
  readonly admin: boolean
  /** An admin page members may open too, without its forms. */
  readonly readable?: boolean
  readonly component: ComponentType
}

export const PAGES: ReadonlyArray<PageEntry> = [
  { path: "overview", title: "Overview", admin: false, component: Overview },
  { path: "spend", title: "Spend", admin: false, component: Spend },
  { path: "ledger", title: "Ledger", admin: false, component: Ledger },
  { path: "grants", title: "Grants", admin: false, component: Grants },
  { path: "sessions", title: "Sessions", admin: false, component: Sessions },
  { path: "budget", title: "Budget", admin: true, component: Budget },
  { path: "credit", title: "Credit", admin: true, component: Credit },
  { path: "timezone", title: "Time zone", admin: true, readable: true, component: TimeZone },
  { path: "limits", title: "Limits", admin: true, readable: true, component: Limits },
  { path: "alerts", title: "Alerts", admin: true, readable: true, component: Alerts },
  { path: "webhooks", title: "Webhooks", admin: true, component: Webhooks },
  { path: "policy", title: "Policy", admin: true, readable: true, component: Policy },
  { path: "repositories", title: "Repositories", admin: true, readable: true, component: Repositories }
]

/** The page shown at `/console` with no page named. */
export const HOME = "overview"
