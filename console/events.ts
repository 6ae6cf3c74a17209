/**
 * Events as sentences a person reads (D17's catalog, D20): one function per type, with names for
 * repositories and users (D23) and amounts as the console writes them. The one place a type
 * becomes words: the overview's list and any other page call `eventSentence`.
 */
import type { AccountEvent, AccountEventOf } from "@account-api/client/web"
import { type Directory, repositoryName, userName } from "./directory.js"
import { formatLocalTime, formatTime, formatUsd, middleId } from "./format.js"
import { grantTitle } from "./grants.js"

type SavedLimit = AccountEventOf<"limits.updated">["data"]["limits"][number]
type LimitLike = Pick<SavedLimit, "scope" | "scope_id" | "period"> & {
  readonly window_minutes?: number | null
  /** The member an `each_` limit applies to here (D22): a user's or repository's id, a label's key=value. */
  readonly applies_to?: string | null | undefined
}

/**
 * What a limit governs, by name: "the account", "repository web", "each session", and (D22)
 * "each user", "each repository", "each value of label team".
 */
export const scopeWords = (directory: Directory, limit: Pick<LimitLike, "scope" | "scope_id">): string => {
  switch (limit.scope) {
    case "account":
      return "the account"
    case "session":
      return "each session"
    case "repository":
      return `repository ${repositoryName(directory, limit.scope_id)}`
    case "user":
      return `user ${userName(directory, limit.scope_id)}`
    case "label":
      return `label ${limit.scope_id ?? ""}`
    case "each_user":
      return "each user"
    case "each_repository":
      return "each repository"
    case "each_label":
      return `each value of label ${limit.scope_id ?? ""}`
  }
}

/** The member an `each_` limit applies to (D22), by name: "alice", "web", "team=ads"; undefined for none. */
export const memberWords = (directory: Directory, limit: Pick<LimitLike, "scope" | "applies_to">) =>
  limit.applies_to === null || limit.applies_to === undefined
    ? undefined
    : limit.scope === "each_user"
    ? userName(directory, limit.applies_to)
    : limit.scope === "each_repository"
    ? repositoryName(directory, limit.applies_to)
    : limit.applies_to

/** A rolling window's length in words: "60 minutes", "2 hours", "90 minutes". */
export const windowWords = (minutes: number | null): string =>
  minutes === null
    ? "window"
    : minutes % 60 === 0 && minutes >= 120
    ? `${minutes / 60} hours`
    : `${minutes} minutes`

/** A limit's period after its scope: "per day", "over the last 60 minutes", "per session". */
export const perPeriodWords = (limit: Pick<LimitLike, "period" | "window_minutes">): string =>
  limit.period === "rolling" ? `over the last ${windowWords(limit.window_minutes ?? null)}` : `per ${limit.period}`

/** A limit's period in words after "per" or alone: "month", "hour", "rolling 60 minutes". */
export const periodWords = (limit: Pick<LimitLike, "period" | "window_minutes">): string =>
  limit.period === "rolling" ? `rolling ${windowWords(limit.window_minutes ?? null)}` : limit.period

/** "the account's limit per month", "each session's cap", "each user's limit per day (for alice)". */
export const limitWords = (directory: Directory, limit: LimitLike): string => {
  const member = memberWords(directory, limit)
  return `${ownLimitWords(directory, limit)}${member === undefined ? "" : ` (for ${member})`}`
}

const ownLimitWords = (directory: Directory, limit: LimitLike): string =>
  limit.period === "concurrent"
    ? `${scopeWords(directory, limit)}'s limit of sessions at once`
    : limit.period === "session"
    ? `${scopeWords(directory, limit)}'s cap per session`
    : limit.period === "rolling"
    ? `${scopeWords(directory, limit)}'s limit over the last ${windowWords(limit.window_minutes ?? null)}`
    : `${scopeWords(directory, limit)}'s limit per ${limit.period}`

const boundWords = (limit: SavedLimit): string =>
  limit.period === "concurrent"
    ? `${limit.max_open_sessions ?? 0} at once`
    : `${formatUsd(limit.amount_usd ?? "0")}${
      limit.raise === null ? "" : `, raised to ${formatUsd(limit.raise.amount_usd)}`
    }`

/** What changed between two saved lists of limits, by limit: added, removed, and each bound that moved. */
export const limitChanges = (
  directory: Directory,
  before: ReadonlyArray<SavedLimit> | undefined,
  after: ReadonlyArray<SavedLimit>
): ReadonlyArray<string> => {
  if (before === undefined) return after.map((limit) => `${limitWords(directory, limit)} ${boundWords(limit)}`)
  const added = after.filter((limit) => !before.some((old) => old.id === limit.id))
  const removed = before.filter((limit) => !after.some((now) => now.id === limit.id))
  const changed = after.flatMap((limit) => {
    const old = before.find((one) => one.id === limit.id)
    return old === undefined || boundWords(old) === boundWords(limit) ? [] : [{ old, limit }]
  })
  return [
    ...added.map((limit) => `added ${limitWords(directory, limit)} of ${boundWords(limit)}`),
    ...changed.map(({ limit, old }) =>
      `${limitWords(directory, limit)} from ${boundWords(old)} to ${boundWords(limit)}`
    ),
    ...removed.map((limit) => `removed ${limitWords(directory, limit)} of ${boundWords(limit)}`)
  ]
}

/**
 * One event as a sentence. `older` is the list's next older event of the same type, when there
 * is one: `limits.updated` is told as what changed since it.
 */
export const eventSentence = (directory: Directory, event: AccountEvent, older?: AccountEvent): string => {
  switch (event.type) {
    case "wallet.budget_set": {
      const { entry, wallet } = event.data
      return `Budget set to ${formatUsd(wallet.budget_usd)} (${entry.amount_usd.startsWith("-") ? "" : "+"}${
        formatUsd(entry.amount_usd)
      }): ${formatUsd(wallet.available_usd)} available`
    }
    case "wallet.credit_added":
      return `Credit of ${formatUsd(event.data.entry.amount_usd)} added: ${
        formatUsd(event.data.wallet.available_usd)
      } available`
    case "wallet.balance_low":
      return `Available fell below ${formatUsd(event.data.threshold_usd)}: ${
        formatUsd(event.data.wallet.available_usd)
      } available`
    case "wallet.balance_recovered":
      return `Available rose back to ${formatUsd(event.data.threshold_usd)}: ${
        formatUsd(event.data.wallet.available_usd)
      } available`
    case "wallet.depleted":
      return `The wallet ran out: ${formatUsd(event.data.wallet.available_usd)} available`
    case "session.closed": {
      const { session } = event.data
      return `Session ${middleId(session.session_id)} ${
        session.closed_reason === "expired" ? "expired" : "closed"
      }: spent ${formatUsd(session.spent_usd)}${
        session.unfunded_usd.replace(/[0.]/g, "") === "" ? "" : `, ${formatUsd(session.unfunded_usd)} beyond its holds`
      }`
    }
    case "session.cap_reached": {
      const { max_usd, session } = event.data
      return `Session ${middleId(session.session_id)} reached its cap of ${formatUsd(max_usd)}: spent ${
        formatUsd(session.spent_usd)
      }, ${formatUsd(session.reserved_usd)} held`
    }
    case "limit.reached": {
      const { limit } = event.data
      return `${capitalised(limitWords(directory, limit))} was reached: ${formatUsd(limit.used_usd)} of ${
        formatUsd(limit.amount_usd)
      }`
    }
    case "limit.approaching": {
      const { limit, percent, used_usd } = event.data
      return `${capitalised(limitWords(directory, limit))} is at ${percent}%: ${formatUsd(used_usd)} of ${
        formatUsd(limit.amount_usd)
      }`
    }
    case "grant.expiring": {
      const { days_left, free_usd, grant } = event.data
      return `${grantTitle(grant)} expires in ${days_left === 1 ? "1 day" : `${days_left} days`}, on ${
        formatLocalTime(grant.expires_at ?? "")
      }: ${formatUsd(free_usd)} of it is unspent and not held`
    }
    case "grant.expired":
      return `${grantTitle(event.data.grant)} expired: ${formatUsd(event.data.entry.amount_usd)} left the budget, now ${
        formatUsd(event.data.entry.budget_after_usd)
      }`
    case "grant.voided":
      return `${grantTitle(event.data.grant)} was voided: ${
        formatUsd(event.data.entry.amount_usd)
      } left the budget, now ${formatUsd(event.data.entry.budget_after_usd)}`
    case "webhook_endpoint.disabled":
      return `Webhook ${event.data.endpoint.url} was turned off: ${
        event.data.reason === "gone" ? "it answered 410 Gone" : "its deliveries failed for 5 days"
      }`
    case "limits.updated": {
      const previous = older?.type === "limits.updated" ? older.data.limits : undefined
      const changes = limitChanges(directory, previous, event.data.limits)
      const who = userName(directory, event.data.user_id)
      if (event.data.limits.length === 0) return `${who} removed every limit (version ${event.data.version})`
      return `${who} ${previous === undefined ? "set" : "changed"} the limits (version ${event.data.version}): ${
        changes.length === 0 ? "nothing changed" : changes.join("; ")
      }`
    }
    case "settings.updated": {
      const { timezone, week_start } = event.data
      return `${userName(directory, event.data.user_id)} set the time zone to ${timezone}, weeks from ${
        week_start === "sunday" ? "Sunday" : "Monday"
      } (version ${event.data.version})`
    }
    case "limit.raise_requested": {
      const { request } = event.data
      return `${userName(directory, request.requested_by)} asked to raise a limit to ${
        formatUsd(request.amount_usd)
      } until ${formatLocalTime(request.until)}: ${request.reason}`
    }
    case "limit.raise_decided": {
      const { request } = event.data
      const who = userName(directory, request.decided_by)
      return request.state === "approved"
        ? `${who} approved a limit raise to ${formatUsd(request.approved_amount_usd)} until ${
          formatLocalTime(request.approved_until)
        }`
        : `${who} declined a limit raise to ${formatUsd(request.amount_usd)}${
          request.decline_reason === null ? "" : `: ${request.decline_reason}`
        }`
    }
  }
}

const capitalised = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`

/** A line of the events list: one event, or a run of one balance's crossings of one threshold. */
export interface EventLine {
  readonly key: string
  readonly event: AccountEvent
  /** How many crossings of the same threshold the line stands for, newest first; 1 for one event. */
  readonly count: number
  readonly since: string
}

const crossing = (event: AccountEvent): string | undefined =>
  event.type === "wallet.balance_low" || event.type === "wallet.balance_recovered"
    ? event.data.threshold_usd
    : undefined

/**
 * Events newest first as lines: a balance flip-flopping across one threshold (low, recovered,
 * low, …) is one line with a count, told by its newest crossing, where that crossing stands.
 */
export const eventLines = (events: ReadonlyArray<AccountEvent>): ReadonlyArray<EventLine> => {
  const lines: Array<EventLine> = []
  for (const event of events) {
    const threshold = crossing(event)
    // Crossings of one threshold are one line however other events (a session closing) fall between.
    const run = threshold === undefined ? -1 : lines.findIndex((line) => crossing(line.event) === threshold)
    const line = lines[run]
    if (line !== undefined) lines[run] = { ...line, count: line.count + 1, since: event.created_at }
    else lines.push({ key: event.id, event, count: 1, since: event.created_at })
  }
  return lines
}

/** A run's words: "crossed $10.00 6 times since 2026-03-01 09:30 UTC". */
export const runWords = (line: EventLine): string =>
  line.count === 1 ?
    "" :
    `Crossed ${formatUsd(crossing(line.event) ?? "0")} ${line.count} times since ${formatTime(line.since)}; the last: `
