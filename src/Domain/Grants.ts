import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import * as Money from "./Money.js"
import type { Movement } from "./Movement.js"

/**
 * Credit grants (D21, docs/decisions/D21-credit-grants.md): what a grant is, the one draw-down
 * order, and the rules that earmark, draw, return and end grants, as pure functions over a
 * wallet's grants. The settlement planner (Settlement/Plan.ts) and the wallet's own mutations
 * (Wallets.ts) both move grants through `makeGrantBook`, so the rules have one home.
 */

export const GrantCategory = Schema.Literal("paid", "promotional").annotations({
  identifier: "GrantCategory",
  message: () => ({ message: "must be \"paid\" or \"promotional\"", override: true })
})
export type GrantCategory = typeof GrantCategory.Type

export const GrantState = Schema.Literal("live", "used", "expired", "voided")
export type GrantState = typeof GrantState.Type

/** D21: an integer from 0 to 100; lower is drawn first. */
export const GrantPriority = Schema.Number.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 0 && n <= 100 ? true : "must be an integer from 0 to 100", {
    jsonSchema: { type: "integer", minimum: 0, maximum: 100 }
  })
).annotations({
  identifier: "GrantPriority",
  message: () => ({ message: "must be an integer from 0 to 100", override: true })
})

export const DEFAULT_PRIORITY = 50
export const DEFAULT_CATEGORY: GrantCategory = "paid"
/** How far ahead a grant may expire (D21). */
export const MAX_EXPIRY_YEARS = 5
/** The `grant.expiring` warnings, in days before `expires_at` (D21). */
export const WARNING_DAYS = [7, 1] as const
const DAY_MS = 86_400_000

/** A grant's part in one ledger entry (D21): which grant, and how much of the entry's amount. */
export const GrantShare = Schema.Struct({ grant_id: Schema.String, amount_usd: Money.Usd })
export type GrantShare = typeof GrantShare.Type

/** A grant as clients read it (`GET /developer/account/wallet/grants`). */
export class Grant extends Schema.Class<Grant>("Grant")({
  id: Schema.String,
  /** Its `credit_added` entry. */
  entry_id: Schema.String,
  amount_usd: Money.Usd,
  /** Spent from it. */
  drawn_usd: Money.Usd,
  /** Earmarked by open holds. */
  held_usd: Money.Usd,
  /** amount - drawn - held - ended: what can still be earmarked or drawn (0 once it ended). */
  free_usd: Money.Usd,
  /** Taken out of the budget by its expiry or its void. */
  ended_usd: Money.Usd,
  priority: Schema.Int,
  category: GrantCategory,
  expires_at: Schema.NullOr(Schema.DateTimeUtc),
  state: GrantState,
  note: Schema.NullOr(Schema.String),
  created_at: Schema.DateTimeUtc
}) {}

export class GrantList extends Schema.Class<GrantList>("GrantList")({
  /** Live grants in draw-down order; ended ones newest first. */
  grants: Schema.Array(Grant)
}) {}

/** The soonest live grant to expire, on the wallet read (D21). */
export const NextExpiry = Schema.Struct({ at: Schema.DateTimeUtc, free_usd: Money.Usd }).annotations({
  identifier: "NextExpiry"
})

export class GrantNotFound extends Schema.TaggedError<GrantNotFound>()(
  "GrantNotFound",
  { detail: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

export class GrantNotLive extends Schema.TaggedError<GrantNotLive>()(
  "GrantNotLive",
  { detail: Schema.String, state: GrantState },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** A grant's money and terms, as the rules move them. */
export interface GrantBalance {
  readonly id: string
  readonly amount: Money.Decimal
  readonly drawn: Money.Decimal
  readonly held: Money.Decimal
  readonly ended: Money.Decimal
  readonly priority: number
  readonly category: GrantCategory
  readonly expires_at: Date | null
  readonly state: GrantState
  readonly created_at: Date
  /** The `grant.expiring` warnings sent: the smallest day count sent, null before the first. */
  readonly warned_days: number | null
}

export const freeOf = (grant: GrantBalance): Money.Decimal =>
  grant.amount.minus(grant.drawn).minus(grant.held).minus(grant.ended)

/**
 * The draw-down order (D21): priority ascending, then the soonest expiry (never-expiring last),
 * then promotional before paid, then creation, then id.
 */
export const drawOrder = (a: GrantBalance, b: GrantBalance): number =>
  a.priority - b.priority ||
  (a.expires_at?.getTime() ?? Infinity) - (b.expires_at?.getTime() ?? Infinity) ||
  (a.category === b.category ? 0 : a.category === "promotional" ? -1 : 1) ||
  a.created_at.getTime() - b.created_at.getTime() ||
  (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** From `expires_at` on, nothing new is earmarked on or drawn from a grant's free amount. */
export const isDrawable = (grant: GrantBalance, now: Date): boolean =>
  grant.state === "live" && (grant.expires_at === null || grant.expires_at.getTime() > now.getTime())

/** A live grant whose time has come: the next writer of its wallet ends it first. */
export const isDue = (grant: GrantBalance, now: Date): boolean =>
  grant.state === "live" && grant.expires_at !== null && grant.expires_at.getTime() <= now.getTime()

/**
 * The `grant.expiring` warning due for a grant at `now`, if any: the 7-day one, then the 1-day
 * one, each once. A warning whose moment came before the grant was made is not sent (a grant
 * made to expire in three days gets only the 1-day one), nor one overtaken by the expiry.
 */
export const warningDue = (grant: GrantBalance, now: Date): number | undefined => {
  if (grant.state !== "live" || grant.expires_at === null || !isDrawable(grant, now)) return undefined
  const expires = grant.expires_at.getTime()
  const due = WARNING_DAYS.filter((days) =>
    (grant.warned_days === null || days < grant.warned_days) &&
    expires - days * DAY_MS <= now.getTime() &&
    expires - days * DAY_MS > grant.created_at.getTime()
  )
  return due.at(-1)
}

/**
 * The next moment the housekeeping sweep has something to do for a grant: its next warning or
 * its expiry; null for a grant that never expires or has ended.
 */
export const nextDueAt = (grant: GrantBalance): Date | null => {
  if (grant.state !== "live" || grant.expires_at === null) return null
  const expires = grant.expires_at.getTime()
  const next = WARNING_DAYS.find((days) =>
    (grant.warned_days === null || days < grant.warned_days) &&
    expires - days * DAY_MS > grant.created_at.getTime()
  )
  return new Date(next === undefined ? expires : expires - next * DAY_MS)
}

/** Used once it is all drawn; an ended grant keeps its state. */
const settled = (grant: GrantBalance): GrantBalance =>
  grant.state === "live" && grant.drawn.eq(grant.amount) ? { ...grant, state: "used" } : grant

/** An earmark: what of a session's hold is on one grant. */
export interface Earmark {
  readonly grant_id: string
  readonly amount: Money.Decimal
}

/** A grant's part of a spend, with what of it came out of the session's earmarks. */
export interface Draw extends Earmark {
  readonly from_reserved: Money.Decimal
}

/** What ended of a grant: by its expiry (or a return to an expired grant), or by its void. */
export interface Ending {
  readonly grant_id: string
  readonly amount: Money.Decimal
  readonly kind: "credit_expired" | "credit_voided"
}

/** The movement that ends a grant's amount (D21), naming it. */
export const endingMovement = (ending: Ending): Movement => ({
  kind: ending.kind,
  amount_usd: ending.amount,
  grants: [{ grant_id: ending.grant_id, amount: ending.amount }]
})

const merged = <T extends Earmark>(items: ReadonlyArray<T>, add: (a: T, b: T) => T): Array<T> => {
  const byGrant = new Map<string, T>()
  for (const item of items) {
    const seen = byGrant.get(item.grant_id)
    byGrant.set(item.grant_id, seen === undefined ? item : add(seen, item))
  }
  return [...byGrant.values()]
}

/** A wallet's grants as one transaction moves them; `changed` lists those it moved, for its write. */
export interface GrantBook {
  readonly all: () => ReadonlyArray<GrantBalance>
  readonly changed: () => ReadonlyArray<GrantBalance>
  /** Ends every due grant's free amount (D21), soonest first. */
  readonly expireDue: (now: Date) => ReadonlyArray<Ending>
  /** Earmarks up to `amount` on the drawable grants in draw-down order; the rest is on the base. */
  readonly earmark: (amount: Money.Decimal, now: Date) => ReadonlyArray<Earmark>
  /**
   * A spend: first from its session's earmarks (their order), then from drawable grants' free
   * amounts in draw-down order, the rest from the base. Answers the draws and what is left of the
   * earmarks.
   */
  readonly draw: (
    earmarks: ReadonlyArray<Earmark>,
    amount: Money.Decimal,
    now: Date
  ) => { readonly draws: ReadonlyArray<Draw>; readonly earmarks: ReadonlyArray<Earmark> }
  /** Earmarks returned (a release, a lapsed hold): to their grants, or ended with a grant that has. */
  readonly giveBack: (earmarks: ReadonlyArray<Earmark>) => ReadonlyArray<Ending>
  /** A void (D21): the grant's free amount ends at once. */
  readonly end: (grantId: string, kind: Ending["kind"]) => Ending | undefined
  /** Records a `grant.expiring` warning sent. */
  readonly warned: (grantId: string, days: number) => void
  /** Adds a grant this transaction made. */
  readonly add: (grant: GrantBalance) => void
}

export const makeGrantBook = (grants: ReadonlyArray<GrantBalance>): GrantBook => {
  const book = new Map(grants.map((grant) => [grant.id, grant]))
  const changed = new Set<string>()
  // The order reads only a grant's terms, which never change: sorted once, not on every draw.
  let order = [...grants].sort(drawOrder).map((grant) => grant.id)
  const set = (grant: GrantBalance) => {
    if (!book.has(grant.id)) {
      order = [...order.flatMap((id) => book.get(id) ?? []), grant].sort(drawOrder).map((g) => g.id)
    }
    book.set(grant.id, settled(grant))
    changed.add(grant.id)
  }
  const ordered = () => order.flatMap((id) => book.get(id) ?? [])
  const endFree = (grant: GrantBalance, state: "expired" | "voided", kind: Ending["kind"]): Ending => {
    const free = freeOf(grant)
    set({ ...grant, ended: grant.ended.plus(free), state })
    return { grant_id: grant.id, amount: free, kind }
  }
  return {
    all: ordered,
    changed: () => [...changed].flatMap((id) => book.get(id) ?? []),
    expireDue: (now) =>
      ordered().filter((grant) => isDue(grant, now)).map((grant) => endFree(grant, "expired", "credit_expired")),
    earmark: (amount, now) => {
      const earmarks: Array<Earmark> = []
      let left = amount
      for (const grant of ordered()) {
        if (left.lte(0)) break
        if (!isDrawable(grant, now)) continue
        const take = Money.min(freeOf(grant), left)
        if (take.lte(0)) continue
        set({ ...grant, held: grant.held.plus(take) })
        earmarks.push({ grant_id: grant.id, amount: take })
        left = left.minus(take)
      }
      return earmarks
    },
    draw: (earmarks, amount, now) => {
      const draws: Array<Draw> = []
      const kept: Array<Earmark> = []
      let left = amount
      for (const earmark of earmarks) {
        const grant = book.get(earmark.grant_id)
        const take = Money.min(earmark.amount, left)
        if (grant === undefined || take.lte(0)) {
          kept.push(earmark)
          continue
        }
        set({ ...grant, held: grant.held.minus(take), drawn: grant.drawn.plus(take) })
        draws.push({ grant_id: grant.id, amount: take, from_reserved: take })
        if (earmark.amount.gt(take)) kept.push({ grant_id: earmark.grant_id, amount: earmark.amount.minus(take) })
        left = left.minus(take)
      }
      for (const grant of ordered()) {
        if (left.lte(0)) break
        if (!isDrawable(grant, now)) continue
        const take = Money.min(freeOf(grant), left)
        if (take.lte(0)) continue
        set({ ...grant, drawn: grant.drawn.plus(take) })
        draws.push({ grant_id: grant.id, amount: take, from_reserved: Money.zero })
        left = left.minus(take)
      }
      return {
        draws: merged(draws, (a, b) => ({
          grant_id: a.grant_id,
          amount: a.amount.plus(b.amount),
          from_reserved: a.from_reserved.plus(b.from_reserved)
        })),
        earmarks: kept
      }
    },
    giveBack: (earmarks) => {
      const endings: Array<Ending> = []
      for (const earmark of earmarks) {
        const grant = book.get(earmark.grant_id)
        if (grant === undefined || earmark.amount.lte(0)) continue
        const returned = { ...grant, held: grant.held.minus(earmark.amount) }
        if (grant.state === "expired" || grant.state === "voided") {
          // What comes back to an ended grant ends then, in the same transaction (D21).
          set({ ...returned, ended: returned.ended.plus(earmark.amount) })
          endings.push({
            grant_id: grant.id,
            amount: earmark.amount,
            kind: grant.state === "voided" ? "credit_voided" : "credit_expired"
          })
        } else set(returned)
      }
      return endings
    },
    end: (grantId, kind) => {
      const grant = book.get(grantId)
      if (grant === undefined || grant.state !== "live") return undefined
      return endFree(grant, kind === "credit_voided" ? "voided" : "expired", kind)
    },
    warned: (grantId, days) => {
      const grant = book.get(grantId)
      if (grant !== undefined) set({ ...grant, warned_days: days })
    },
    add: (grant) => set(grant)
  }
}
