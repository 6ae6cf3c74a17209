import { Either } from "effect"
import * as Money from "./Money.js"
import type { LedgerEntryKind } from "./Wallet.js"

/**
 * A money movement of one wallet: what a ledger entry records. The rules that
 * decide whether a movement may happen (version, budget floor, funds) belong to
 * the caller; this module only computes the balances after it and refuses
 * movements that would leave the books inconsistent (a negative balance, a
 * budget above what the database holds, a spend taken from more than is held).
 */
export type Movement = BudgetSet | CreditAdded | CreditExpired | CreditVoided | Reserve | ReserveRelease | Spend

/**
 * A grant's part in a movement (D21): which grant it added, earmarked, returned, drew or ended,
 * and how much; on a spend, `from_reserved` says what of it came out of the session's earmarks.
 */
export interface GrantPart {
  readonly grant_id: string
  readonly amount: Money.Decimal
  readonly from_reserved?: Money.Decimal
}

/** The references a ledger entry carries beside its amount. */
export interface Annotations {
  readonly note?: string | null | undefined
  /** The key of the request or job that moved the money, for the export (D13). */
  readonly idempotency_key?: string | null | undefined
  /** The grants it moved (D21); none when it moved only the base. */
  readonly grants?: ReadonlyArray<GrantPart> | undefined
}

export interface SessionAnnotations extends Annotations {
  readonly session_id: string
  readonly task_id?: string | null | undefined
  /** The session's attribution (D16), on each of its entries. */
  readonly repository_id?: string | null | undefined
  readonly user_id?: string | null | undefined
  /** The session's labels (D19), on each of its entries; none when left out. */
  readonly labels?: Readonly<Record<string, string>> | undefined
}

/** Sets the total budget; the entry's amount is the signed change. A budget decision (D6). */
export interface BudgetSet extends Annotations {
  readonly kind: "budget_set"
  readonly budget_usd: Money.Decimal
}

/** Adds to the budget. A budget decision (D6). */
export interface CreditAdded extends Annotations {
  readonly kind: "credit_added"
  readonly amount_usd: Money.Decimal
}

/**
 * A grant's free amount leaving the budget (D21): by its expiry (not a budget decision: the
 * version stays) or by its void (a person's budget decision, as a credit is). May be zero: a
 * grant whose every dollar is earmarked still ends, with its entry, and its earmarks end as their
 * holds come back.
 */
export interface CreditExpired extends Annotations {
  readonly kind: "credit_expired"
  readonly amount_usd: Money.Decimal
}

export interface CreditVoided extends Annotations {
  readonly kind: "credit_voided"
  readonly amount_usd: Money.Decimal
}

/** Holds funds for a running session (D8). */
export interface Reserve extends SessionAnnotations {
  readonly kind: "reserve"
  readonly amount_usd: Money.Decimal
}

/** Returns unused held funds (D8). */
export interface ReserveRelease extends SessionAnnotations {
  readonly kind: "reserve_release"
  readonly amount_usd: Money.Decimal
}

/**
 * Books settled work (D8): `amount_usd` moves to spent, `from_reserved_usd` of
 * it out of the session's hold; the rest is charged directly.
 */
export interface Spend extends SessionAnnotations {
  readonly kind: "spend"
  readonly amount_usd: Money.Decimal
  readonly from_reserved_usd: Money.Decimal
  /** The model the work paid for (D19), on the spend's entry. */
  readonly model?: string | null | undefined
}

export interface Balances {
  readonly budget: Money.Decimal
  readonly reserved: Money.Decimal
  readonly spent: Money.Decimal
}

/** A movement applied to balances: the fields of its ledger entry. */
export interface Applied {
  readonly kind: LedgerEntryKind
  readonly amount: Money.Decimal
  readonly after: Balances
  /** Budget decisions count in the wallet's version and turn enforcement on (D6). */
  readonly isBudgetDecision: boolean
  readonly session_id: string | null
  readonly task_id: string | null
  readonly repository_id: string | null
  readonly user_id: string | null
  /** A spend's model (D19); null on every other entry. */
  readonly model: string | null
  /** The session's labels (D19); `{}` on budget decisions. */
  readonly labels: Readonly<Record<string, string>>
  readonly note: string | null
  readonly idempotency_key: string | null
  /** The grants it moved (D21); empty when only the base. */
  readonly grants: ReadonlyArray<GrantPart>
}

export const available = (balances: Balances): Money.Decimal =>
  balances.budget.minus(balances.reserved).minus(balances.spent)

const positive = (name: string, amount: Money.Decimal): Either.Either<void, string> =>
  amount.gt(Money.zero) ? Either.void : Either.left(`${name} must be above zero, got ${Money.format(amount)}`)

/**
 * The balances after a movement, or why the movement would corrupt the books.
 * A refusal here is a bug in the caller, which checks its rules first.
 */
export const applyMovement = (before: Balances, movement: Movement): Either.Either<Applied, string> =>
  Either.gen(function*() {
    const { budget, reserved, spent } = before
    let after: Balances
    let amount: Money.Decimal
    switch (movement.kind) {
      case "budget_set":
        amount = movement.budget_usd.minus(budget)
        after = { budget: movement.budget_usd, reserved, spent }
        break
      case "credit_added":
        yield* positive("a credit", movement.amount_usd)
        amount = movement.amount_usd
        after = { budget: budget.plus(amount), reserved, spent }
        break
      case "credit_expired":
      case "credit_voided":
        if (movement.amount_usd.lt(Money.zero)) {
          return yield* Either.left(`an ended credit is not negative, got ${Money.format(movement.amount_usd)}`)
        }
        amount = movement.amount_usd
        after = { budget: budget.minus(amount), reserved, spent }
        break
      case "reserve":
        yield* positive("a reservation", movement.amount_usd)
        amount = movement.amount_usd
        after = { budget, reserved: reserved.plus(amount), spent }
        break
      case "reserve_release":
        yield* positive("a release", movement.amount_usd)
        amount = movement.amount_usd
        after = { budget, reserved: reserved.minus(amount), spent }
        break
      case "spend":
        yield* positive("a spend", movement.amount_usd)
        if (movement.from_reserved_usd.lt(Money.zero) || movement.from_reserved_usd.gt(movement.amount_usd)) {
          return yield* Either.left(
            `a spend takes between zero and its amount from the hold, got ${Money.format(movement.from_reserved_usd)}`
          )
        }
        amount = movement.amount_usd
        after = { budget, reserved: reserved.minus(movement.from_reserved_usd), spent: spent.plus(amount) }
        break
    }
    for (
      const [name, value] of [["budget", after.budget], ["reserved", after.reserved], ["spent", after.spent]] as const
    ) {
      if (value.lt(Money.zero)) return yield* Either.left(`${movement.kind} would make ${name} negative`)
      if (value.gt(Money.max)) {
        return yield* Either.left(`${movement.kind} would take ${name} above ${Money.format(Money.max)}`)
      }
    }
    // Spends beyond the hold may take available below zero (D8); no further than a column holds.
    if (available(after).lt(Money.max.negated())) {
      return yield* Either.left(`${movement.kind} would take available below -${Money.format(Money.max)}`)
    }
    const isSessionMovement = movement.kind === "reserve" || movement.kind === "reserve_release" ||
      movement.kind === "spend"
    return {
      kind: movement.kind,
      amount,
      after,
      // An expiry is the clock's doing, not a person's: it leaves the version and enforcement as they are (D21).
      isBudgetDecision: !isSessionMovement && movement.kind !== "credit_expired",
      session_id: isSessionMovement ? movement.session_id : null,
      task_id: isSessionMovement ? movement.task_id ?? null : null,
      repository_id: isSessionMovement ? movement.repository_id ?? null : null,
      user_id: isSessionMovement ? movement.user_id ?? null : null,
      model: movement.kind === "spend" ? movement.model ?? null : null,
      labels: isSessionMovement ? movement.labels ?? {} : {},
      note: movement.note ?? null,
      idempotency_key: movement.idempotency_key ?? null,
      grants: movement.grants ?? []
    }
  })
