import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One wallet per account (D3, D6). Account ids are UUIDs of organisations or
  // users, unique across both, so the id alone finds the wallet. `available` is
  // not stored: it is always budget - reserved - spent and may go negative
  // after an over-spend (D8), while the three stored amounts never do.
  // `last_sequence` is the sequence of the wallet's newest ledger entry, taken
  // and advanced under this row's lock, so sequences have no gaps (D7).
  yield* sql`
    CREATE TABLE wallets (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL UNIQUE,
      budget_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (budget_usd >= 0),
      reserved_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (reserved_usd >= 0),
      spent_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (spent_usd >= 0),
      enforced boolean NOT NULL DEFAULT false,
      version integer NOT NULL DEFAULT 0 CHECK (version >= 0),
      last_sequence bigint NOT NULL DEFAULT 0 CHECK (last_sequence >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE TYPE ledger_entry_kind AS ENUM ('budget_set', 'credit_added', 'reserve', 'reserve_release', 'spend')`
  // Every movement of a wallet, in order (D7). `amount_usd` is positive except
  // for budget_set, where it is the signed change. Session and task references
  // belong to the session movements only.
  yield* sql`
    CREATE TABLE ledger_entries (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      sequence bigint NOT NULL CHECK (sequence > 0),
      kind ledger_entry_kind NOT NULL,
      amount_usd numeric(18, 6) NOT NULL,
      budget_after_usd numeric(18, 6) NOT NULL CHECK (budget_after_usd >= 0),
      reserved_after_usd numeric(18, 6) NOT NULL CHECK (reserved_after_usd >= 0),
      spent_after_usd numeric(18, 6) NOT NULL CHECK (spent_after_usd >= 0),
      available_after_usd numeric(18, 6) NOT NULL,
      session_id text,
      task_id text,
      note text,
      created_at timestamptz NOT NULL DEFAULT now(),
      CHECK (available_after_usd = budget_after_usd - reserved_after_usd - spent_after_usd),
      CHECK (kind = 'budget_set' OR amount_usd > 0),
      CHECK (kind IN ('budget_set', 'credit_added') OR session_id IS NOT NULL),
      CHECK (kind NOT IN ('budget_set', 'credit_added') OR (session_id IS NULL AND task_id IS NULL)),
      -- Consecutive per wallet, and the index behind keyset paging newest
      -- first (scanned backwards): a page costs the same at any depth.
      CONSTRAINT ledger_entries_wallet_sequence_key UNIQUE (wallet_id, sequence)
    )`
  // The ledger is append-only (D7): the database itself refuses to change or
  // remove an entry, whatever the client that asks.
  yield* sql`
    CREATE FUNCTION ledger_entries_refuse_change() RETURNS trigger AS $$
    BEGIN
      RAISE EXCEPTION 'ledger entries are append-only: % is refused', TG_OP
        USING ERRCODE = 'restrict_violation';
    END
    $$ LANGUAGE plpgsql`
  yield* sql`
    CREATE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_refuse_change()`
  // The first success of each wallet mutation per (account, key), replayed to
  // retries (D6). Written in the transaction of the mutation it records, so a
  // failure leaves no record. `response_body` is json, not jsonb, so a replay
  // returns the body byte for byte (jsonb would reorder its keys). Records are
  // kept at least 30 days; pruning older ones is left to operators (README).
  yield* sql`
    CREATE TABLE wallet_idempotency (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      key text NOT NULL CHECK (char_length(key) BETWEEN 1 AND 255),
      endpoint text NOT NULL,
      request_fingerprint text NOT NULL,
      response_status smallint NOT NULL,
      response_body json NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_kind, account_id, key)
    )`
  yield* sql`CREATE INDEX wallet_idempotency_created_at_idx ON wallet_idempotency (created_at)`
})
