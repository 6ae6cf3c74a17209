import { DateTime, Schema } from "effect"
import { freeOf, Grant, type GrantBalance, GrantCategory, GrantState, nextDueAt } from "../Domain/Grants.js"
import * as Money from "../Domain/Money.js"
import type { GrantPart } from "../Domain/Movement.js"

/**
 * Credit grants (D21) as the database keeps them: a grant's row, what a write sends of it, and
 * the `grants` column of ledger entries; with the views clients get of them. No statement here:
 * the wallet's repository (GrantsRepo.ts) and the settlement transition both write these shapes.
 */

/** A grant's row (migration 0026). */
export const GrantRow = Schema.Struct({
  id: Schema.String,
  wallet_id: Schema.String,
  entry_id: Schema.String,
  amount_usd: Money.Usd,
  drawn_usd: Money.Usd,
  held_usd: Money.Usd,
  ended_usd: Money.Usd,
  priority: Schema.Int,
  category: GrantCategory,
  expires_at: Schema.NullOr(Schema.DateTimeUtcFromDate),
  state: GrantState,
  note: Schema.NullOr(Schema.String),
  created_at: Schema.DateTimeUtcFromDate,
  warned_days: Schema.NullOr(Schema.Int)
})
export type GrantRow = typeof GrantRow.Type

/** A row as the rules move it. */
export const balanceOf = (row: GrantRow): GrantBalance => ({
  id: row.id,
  amount: row.amount_usd,
  drawn: row.drawn_usd,
  held: row.held_usd,
  ended: row.ended_usd,
  priority: row.priority,
  category: row.category,
  expires_at: row.expires_at === null ? null : DateTime.toDate(row.expires_at),
  state: row.state,
  created_at: DateTime.toDate(row.created_at),
  warned_days: row.warned_days
})

/** A grant as clients read it: its row's terms, its money as the rules left it. */
export const grantView = (row: GrantRow, balance: GrantBalance = balanceOf(row)): Grant =>
  new Grant({
    id: row.id,
    entry_id: row.entry_id,
    amount_usd: balance.amount,
    drawn_usd: balance.drawn,
    held_usd: balance.held,
    free_usd: freeOf(balance),
    ended_usd: balance.ended,
    priority: balance.priority,
    category: balance.category,
    expires_at: row.expires_at,
    state: balance.state,
    note: row.note,
    created_at: row.created_at
  }, { disableValidation: true })

/** A grant a credit makes (D21). */
export interface NewGrant {
  readonly id: string
  readonly wallet_id: string
  readonly entry_id: string
  readonly balance: GrantBalance
  readonly note: string | null
}

/** A grant's moving columns as a write sends them (this repository's and the settlement transition's). */
export const grantWrite = (grant: GrantBalance) => ({
  id: grant.id,
  drawn_usd: Money.format(grant.drawn),
  held_usd: Money.format(grant.held),
  ended_usd: Money.format(grant.ended),
  state: grant.state,
  warned_days: grant.warned_days,
  next_due_at: nextDueAt(grant)?.toISOString() ?? null
})

/** An entry's grant parts as its `jsonb` column stores them (amounts as text), null when none. */
export const storedGrantParts = (parts: ReadonlyArray<GrantPart>) =>
  parts.length === 0 ? null : parts.map((part) => ({
    grant_id: part.grant_id,
    amount_usd: Money.format(part.amount),
    ...(part.from_reserved === undefined ? {} : { from_reserved_usd: Money.format(part.from_reserved) })
  }))
