import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A running session's money (D8): what it holds and what it has spent. A
  // hold resolves once (released or expired); spends after that are still booked.
  yield* sql`CREATE TYPE settlement_session_state AS ENUM ('open', 'released', 'expired')`
  yield* sql`
    CREATE TABLE settlement_sessions (
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      session_id text NOT NULL,
      task_id text,
      held_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (held_usd >= 0),
      spent_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (spent_usd >= 0),
      state settlement_session_state NOT NULL DEFAULT 'open',
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (wallet_id, session_id),
      CHECK (state = 'open' OR held_usd = 0)
    )`
  // What the expiry sweep looks for: open holds past their time.
  yield* sql`CREATE INDEX settlement_sessions_expiry_idx ON settlement_sessions (expires_at) WHERE state = 'open'`
  // Each job's first outcome, by its idempotency key (D8): a repeat answers
  // `duplicate` with this outcome, whatever the wallet looks like since.
  yield* sql`CREATE TYPE settlement_outcome AS ENUM ('applied', 'insufficient_funds', 'nothing_to_release')`
  yield* sql`
    CREATE TABLE settlement_records (
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      idempotency_key text NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
      kind text NOT NULL CHECK (kind IN ('reserve', 'spend', 'release')),
      session_id text NOT NULL,
      outcome settlement_outcome NOT NULL,
      entry_ids uuid[] NOT NULL DEFAULT '{}',
      unfunded_usd numeric(18, 6),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (wallet_id, idempotency_key)
    )`
})
