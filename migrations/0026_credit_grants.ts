import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // D21 (docs/decisions/D21-credit-grants.md): every credit is a grant, drawn in one stated order.
  // Credits added before this migration stay in the base budget: their money was never drawn
  // grant by grant, so no grant could say how much of it is left.
  yield* sql`ALTER TYPE ledger_entry_kind ADD VALUE 'credit_expired'`
  yield* sql`ALTER TYPE ledger_entry_kind ADD VALUE 'credit_voided'`
  yield* sql`CREATE TYPE grant_category AS ENUM ('paid', 'promotional')`
  yield* sql`CREATE TYPE grant_state AS ENUM ('live', 'used', 'expired', 'voided')`
  // One row per grant, changed only under its wallet's row lock, by the transaction that writes
  // that row (a credit, a void, a settlement batch): the wallet's `xmin` guards the grants as it
  // guards every other fact of the settlement state. `amount = drawn + held + free + ended`, free
  // being what is left; `ended` is what expiry or a void took out of the budget.
  yield* sql`
    CREATE TABLE wallet_grants (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      entry_id uuid NOT NULL UNIQUE,
      amount_usd numeric(18, 6) NOT NULL CHECK (amount_usd > 0),
      drawn_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (drawn_usd >= 0),
      held_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (held_usd >= 0),
      ended_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (ended_usd >= 0),
      priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
      category grant_category NOT NULL,
      expires_at timestamptz,
      state grant_state NOT NULL DEFAULT 'live',
      note text,
      created_at timestamptz NOT NULL DEFAULT now(),
      ended_at timestamptz,
      -- The next moment the housekeeping sweep has something to do for it: a grant.expiring
      -- warning (7 days, then 1 day ahead) or its expiry; null when nothing is due ever.
      next_due_at timestamptz,
      -- The warnings sent: 7 once the 7-day one is, 1 once the 1-day one is.
      warned_days smallint,
      CHECK (drawn_usd + held_usd + ended_usd <= amount_usd)
    ) WITH (fillfactor = 80)`
  // What a settlement batch reads of a wallet: the grants that can still move (`moving`), live
  // ones and ended ones whose earmarks are still held. A used grant, or an ended one with nothing
  // held, never moves again and is never read by settlement. A column of its own, not the
  // predicate `state = 'live' OR held_usd > 0`: a column an index's predicate reads counts as
  // indexed, so every earmark would have written five index entries instead of a HOT update.
  yield* sql`ALTER TABLE wallet_grants ADD COLUMN moving boolean NOT NULL DEFAULT true`
  yield* sql`
    ALTER TABLE wallet_grants ADD CONSTRAINT wallet_grants_moving_check
    CHECK (moving = (state = 'live' OR held_usd > 0))`
  yield* sql`CREATE INDEX wallet_grants_moving_idx ON wallet_grants (wallet_id) WHERE moving`
  // The housekeeping sweep's probe: the live grants with something due by now.
  yield* sql`CREATE INDEX wallet_grants_due_idx ON wallet_grants (next_due_at) WHERE state = 'live'`
  // What the settlement feature's sweep reads of them: when each live grant next has something due.
  yield* sql`CREATE VIEW wallet_grants_due AS SELECT wallet_id, next_due_at FROM wallet_grants WHERE state = 'live'`
  // The grants read: a wallet's grants, newest first for the ended ones.
  yield* sql`CREATE INDEX wallet_grants_wallet_idx ON wallet_grants (wallet_id, created_at DESC)`
  // Which grants an entry earmarked, drew, returned, added or ended: `[{grant_id, amount_usd}]`,
  // a spend's items with `from_reserved_usd` too (what of it came out of the session's
  // earmarks), so the books replay each grant from the entries alone. Null: none.
  yield* sql`ALTER TABLE ledger_entries ADD COLUMN grants jsonb`
  // A session's hold by grant, in the order it draws them: `[{grant_id, amount_usd}]`; the rest
  // of its hold is on the base budget. Null: none.
  yield* sql`ALTER TABLE settlement_sessions ADD COLUMN earmarks jsonb`
  // The ending entries are budget entries (no session) and may be of 0.000000: a grant whose
  // every dollar is earmarked still ends, with its entry. The new kinds are compared as text: an
  // enum value added in this transaction cannot be used in it. Added NOT VALID and validated
  // after, so the ledger is scanned without holding writers off it.
  yield* sql`
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_check1, DROP CONSTRAINT ledger_entries_check2,
      DROP CONSTRAINT ledger_entries_check3,
      ADD CONSTRAINT ledger_entries_amount_check CHECK (kind::text = 'budget_set' OR amount_usd > 0
        OR (kind::text IN ('credit_expired', 'credit_voided') AND amount_usd = 0)) NOT VALID,
      ADD CONSTRAINT ledger_entries_session_check CHECK (
        kind::text IN ('budget_set', 'credit_added', 'credit_expired', 'credit_voided') OR session_id IS NOT NULL
      ) NOT VALID,
      ADD CONSTRAINT ledger_entries_budget_entry_check CHECK (
        kind::text NOT IN ('budget_set', 'credit_added', 'credit_expired', 'credit_voided')
        OR (session_id IS NULL AND task_id IS NULL)
      ) NOT VALID`
  for (const name of ["amount", "session", "budget_entry"]) {
    yield* sql`ALTER TABLE ledger_entries VALIDATE CONSTRAINT ${sql(`ledger_entries_${name}_check`)}`
  }
})
