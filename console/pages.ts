/**
 * The console's pages, in the navigation's order: one entry per page, one file per page under
 * `pages/`. An `admin` page (the forms: budget, credit, limits, alerts, webhooks, policy) is
 * listed under "Settings" and shown to the account's administrators only (`is_admin` from
 * `/auth/me`); a member who opens its address gets a plain "for administrators" note, never a
 * broken page. Add a page by adding its entry here: the router (main.tsx) and the navigation
 * (components/Shell.tsx) read this list alone.
 */
import type { ComponentType } from "preact"
import { Ledger } from "./pages/Ledger.js"
import { Overview } from "./pages/Overview.js"
import { Sessions } from "./pages/Sessions.js"
import { Spend } from "./pages/Spend.js"

export interface PageEntry {
  /** The page's address after `#/`: `overview` is `/console#/overview`. */
  readonly path: string
  readonly title: string
  /** Listed under "Settings" and shown only to administrators. */
  readonly admin: boolean
  readonly component: ComponentType
}

export const PAGES: ReadonlyArray<PageEntry> = [
  { path: "overview", title: "Overview", admin: false, component: Overview },
  { path: "spend", title: "Spend", admin: false, component: Spend },
  { path: "ledger", title: "Ledger", admin: false, component: Ledger },
  { path: "sessions", title: "Sessions", admin: false, component: Sessions }
]

/** The page shown at `/console` with no page named. */
export const HOME = "overview"
