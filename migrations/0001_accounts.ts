import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // UUIDv7: time-ordered ids (D3), so primary-key indexes stay append-mostly.
  yield* sql`
    CREATE FUNCTION uuid_v7() RETURNS uuid AS $$
      SELECT encode(
        set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
          PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
          FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
    $$ LANGUAGE sql VOLATILE`
  yield* sql`
    CREATE TABLE organisations (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    CREATE TABLE users (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      email text NOT NULL,
      name text NOT NULL,
      is_admin boolean NOT NULL DEFAULT false,
      password_hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  // Email matching is case-insensitive (D2): one user per lower-cased address.
  yield* sql`CREATE UNIQUE INDEX users_email_key ON users (lower(email))`
  // A user belongs to at most one organisation; that organisation is their account (D3).
  yield* sql`
    CREATE TABLE memberships (
      user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
      organisation_id uuid NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX memberships_organisation_idx ON memberships (organisation_id)`
  // An account is an organisation ("client") or a user ("user"); its id is that row's id.
  yield* sql`CREATE TYPE account_kind AS ENUM ('client', 'user')`
  yield* sql`
    CREATE TABLE repositories (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (account_kind, account_id, name)
    )`
  yield* sql`
    CREATE TABLE auth_sessions (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      revoked_at timestamptz
    )`
  yield* sql`CREATE INDEX auth_sessions_user_idx ON auth_sessions (user_id) WHERE revoked_at IS NULL`
})
