/**
 * Credit grants (D21) as the console names them: a grant by its note when it has one, else
 * "grant" and its id cut short; a ledger entry's `grants` as which grants paid, held, got back or
 * ended what ("Paid by: Trial credit $3.00, base $1.00"). The Grants page, the ledger and the
 * events all name grants here.
 */
import type { AccountApiClient } from "@account-api/client/web"
import { formatUsd, micros, shortId, usdOfMicros } from "./format.js"
import { useLoad } from "./session.js"

export type Grant = Awaited<ReturnType<AccountApiClient["listGrants"]>>["grants"][number]

/** A ledger entry's part that names grants: `grants: [{ grant_id, amount_usd }]` on every entry. */
export interface GrantShares {
  readonly kind: string
  readonly amount_usd: string
  readonly grants: ReadonlyArray<{ readonly grant_id: string; readonly amount_usd: string }>
}

/** Each grant's note (or null) by id, as the grants read answers it. */
export type GrantNotes = ReadonlyMap<string, string | null>

const hasNote = (note: string | null | undefined): note is string =>
  note !== null && note !== undefined && note.trim() !== ""

const named = (id: string, note: string | null | undefined): string => hasNote(note) ? note : `grant ${shortId(id)}`

/** "Trial credit", or "grant …1a2b3c4d" for a grant without a note. */
export const grantName = (grant: Pick<Grant, "id" | "note">): string => named(grant.id, grant.note)

/** The same at a sentence's start: "Trial credit" as written, "Grant …1a2b3c4d". */
export const grantTitle = (grant: Pick<Grant, "id" | "note">): string =>
  hasNote(grant.note) ? grant.note : `Grant ${shortId(grant.id)}`

/** A grant's name by id; one the notes do not know (made since they were read) by its short id. */
export const grantNameOf = (notes: GrantNotes, id: string): string => named(id, notes.get(id))

/** What the grants of an entry did, in a word per kind. */
const VERB: Readonly<Record<string, string>> = {
  spend: "Paid by",
  reserve: "Held on",
  reserve_release: "Returned to",
  credit_added: "Grant",
  credit_expired: "Expired",
  credit_voided: "Voided"
}

/** The kinds whose amount the base shares with the grants: the rest of it is the base's. */
const SHARED_WITH_BASE = new Set(["spend", "reserve", "reserve_release"])

/**
 * An entry's grants in words: "Paid by: Trial credit $3.00, base $1.00" (the base's part is the
 * amount less the grants', in whole micro-dollars: exact); "" for an entry that moved no grant
 * and no session money (a budget set).
 */
export const grantSharesWords = (notes: GrantNotes, entry: GrantShares): string => {
  const parts = entry.grants.map((share) => `${grantNameOf(notes, share.grant_id)} ${formatUsd(share.amount_usd)}`)
  if (SHARED_WITH_BASE.has(entry.kind)) {
    const base = entry.grants.reduce((rest, share) => rest - micros(share.amount_usd), micros(entry.amount_usd))
    if (base > 0n) parts.push(`base ${formatUsd(usdOfMicros(base))}`)
  }
  return parts.length === 0 ? "" : `${VERB[entry.kind] ?? "Grants"}: ${parts.join(", ")}`
}

const NO_NOTES: GrantNotes = new Map()

/**
 * The notes of the grants these entries name, read once for them (every grant, live and ended)
 * and again only when they name another set of grants; no read when they name none.
 */
export const useGrantNotes = (entries: ReadonlyArray<GrantShares>): GrantNotes => {
  const ids = [...new Set(entries.flatMap((entry) => entry.grants.map((share) => share.grant_id)))].sort().join(" ")
  const read = useLoad(
    async (api): Promise<GrantNotes> =>
      ids === ""
        ? NO_NOTES
        : new Map((await api.listGrants({ state: "all" })).grants.map((grant) => [grant.id, grant.note])),
    [ids]
  )
  return read.data ?? NO_NOTES
}
