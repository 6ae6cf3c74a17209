import { SqlClient, SqlSchema } from "@effect/sql"
import { Data, Effect, Option, Schema } from "effect"
import { AccountKind } from "../Domain/Account.js"
import { GrantShare } from "../Domain/Grants.js"
import { LabelsColumn, storedLabels } from "../Domain/Labels.js"
import * as Money from "../Domain/Money.js"
import type { GrantPart } from "../Domain/Movement.js"
import { LedgerEntry, type LedgerEntryKind } from "../Domain/Wallet.js"
import { PREPARED } from "../Sql.js"
import { isLockTimeout, isSqlError, isUniqueViolation, orDefect } from "../Sql/Errors.js"
import { storedGrantParts } from "./GrantRows.js"

/** Labels as the `jsonb` column stores them: JSON text, null when none. */
const storedLabelsText = (labels: Readonly<Record<string, string>>): string | null => {
  const stored = storedLabels(labels)
  return stored === null ? null : JSON.stringify(stored)
}

/** D6: a wallet mutation waits at most this long for the wallet's row lock, then answers 503. */
const LOCK_TIMEOUT = "2s"

/** `bigint` columns arrive from `pg` as strings; sequences stay far below 2^53. */
const Sequence = Schema.NumberFromString.pipe(Schema.int())

const AccountRef = Schema.Struct({ kind: AccountKind, id: Schema.String })

export class WalletRow extends Schema.Class<WalletRow>("WalletRow")({
  id: Schema.String,
  account_kind: AccountKind,
  account_id: Schema.String,
  budget_usd: Money.Usd,
  reserved_usd: Money.Usd,
  spent_usd: Money.Usd,
  enforced: Schema.Boolean,
  version: Schema.Int,
  last_sequence: Sequence,
  created_at: Schema.DateTimeUtcFromDate,
  updated_at: Schema.DateTimeUtcFromDate
}) {}

/**
 * What an entry records, as the ledger entry declares it (Domain/Wallet.ts); the row adds its id
 * and time, a new entry its wallet. `bigint` sequences arrive from `pg` as strings, labels as the
 * `jsonb` column holds them (null when none).
 */
const {
  created_at: _createdAt,
  grants: _grants,
  id: _id,
  payment_provider: _paymentProvider,
  ...recorded
} = LedgerEntry.fields
const entryFields = { ...recorded, sequence: Sequence, labels: LabelsColumn }

/**
 * An entry's grants (D21) as its `jsonb` column holds them: `[{grant_id, amount_usd}]` (a spend's
 * items with `from_reserved_usd` too, which clients are not shown), null when none.
 */
const GrantsColumn = Schema.transform(
  Schema.NullOr(Schema.Array(GrantShare)),
  Schema.typeSchema(
    Schema.Array(GrantShare)
  ),
  { strict: true, decode: (stored) => stored ?? [], encode: (shown) => shown }
)

/** The same as JSON text. */
const storedGrants = (parts: ReadonlyArray<GrantPart>): string | null => {
  const stored = storedGrantParts(parts)
  return stored === null ? null : JSON.stringify(stored)
}

export const LedgerEntryRow = Schema.Struct({
  id: Schema.String,
  ...entryFields,
  grants: GrantsColumn,
  created_at: Schema.DateTimeUtcFromDate
})
export type LedgerEntryRow = typeof LedgerEntryRow.Type

/** An entry's id and sequence with the balances after it. */
export const EntryBalances = Schema.Struct({
  id: Schema.String,
  sequence: Sequence,
  budget_after_usd: Money.Usd,
  reserved_after_usd: Money.Usd,
  spent_after_usd: Money.Usd,
  available_after_usd: Money.Usd
})
export type EntryBalances = typeof EntryBalances.Type

/** An entry to append; its id is the writer's, so that the same transaction can name it before it is written. */
export const NewLedgerEntry = Schema.Struct({
  id: Schema.String,
  wallet_id: Schema.String,
  ...entryFields,
  /** Not part of the entry clients page through (D7); the export names it (D13). */
  idempotency_key: Schema.NullOr(Schema.String)
})
export type NewLedgerEntry = typeof NewLedgerEntry.Type & {
  /** What it moved of each grant (D21), as the books replay it. */
  readonly grants: ReadonlyArray<GrantPart>
}

/** The balances a locked wallet is left with, and the newest sequence its writer read under the lock. */
export const WalletUpdate = Schema.Struct({
  id: Schema.String,
  read_sequence: Sequence,
  budget_usd: Money.Usd,
  reserved_usd: Money.Usd,
  spent_usd: Money.Usd,
  enforced: Schema.Boolean,
  version: Schema.Int,
  last_sequence: Sequence
})
export type WalletUpdate = typeof WalletUpdate.Type

/** Locked wallets' new balances and the entries appended to them. */
export interface AppendEntries {
  readonly wallets: ReadonlyArray<WalletUpdate>
  readonly entries: ReadonlyArray<NewLedgerEntry>
}

/** A wallet row as the lock read it, with the time of the transaction that holds it: `now()`, which its writes stamp. */
export const LockedWalletRow = Schema.Struct({ ...WalletRow.fields, transaction_time: Schema.DateTimeUtcFromDate })
export type LockedWalletRow = typeof LockedWalletRow.Type

/**
 * An entry as the API writes it, formatted by PostgreSQL: amounts at their six decimals and the
 * time in ISO 8601 UTC to the millisecond, exactly as the schemas would encode them, so a page
 * or an export passes rows from our own database through without decoding and encoding each.
 */
export interface FormattedEntryRow {
  readonly id: string
  readonly sequence: string
  readonly created_at: string
  readonly kind: LedgerEntryKind
  readonly amount_usd: string
  readonly budget_after_usd: string
  readonly reserved_after_usd: string
  readonly spent_after_usd: string
  readonly available_after_usd: string
  readonly session_id: string | null
  readonly task_id: string | null
  readonly note: string | null
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly model: string | null
}

/**
 * An entry as the export writes it (D13), with the key that moved its money, its labels (D19) and
 * its grants (D21) as JSON text.
 */
export interface ExportRow extends FormattedEntryRow {
  readonly idempotency_key: string | null
  readonly labels: string
  readonly grants: string
}

export const IdempotencyRecord = Schema.Struct({
  endpoint: Schema.String,
  request_fingerprint: Schema.String,
  /** The first success's result as the client received it; parsed by `pg` from a `json` column, so its keys keep their order. */
  response_body: Schema.Unknown
})
export type IdempotencyRecord = typeof IdempotencyRecord.Type

/** The wallet's row stayed locked past the lock timeout (D6): nothing was written. */
export class WalletLocked extends Data.TaggedError("WalletLocked") {}

/** Another transaction recorded this idempotency key first. */
export class KeyRecorded extends Data.TaggedError("KeyRecorded") {}

/** A lock wait past the timeout is the wallet being busy; any other failure is the repository's defect. */
const lockTimeoutIsBusy = <A, E, R>(query: Effect.Effect<A, E, R>): Effect.Effect<A, WalletLocked, R> =>
  Effect.catchAll(
    query,
    (error) => isSqlError(error) && isLockTimeout(error) ? Effect.fail(new WalletLocked()) : Effect.die(error)
  )

/** Wallets, their ledger and the idempotency records of wallet mutations: SQL only, no decisions. */
export class WalletsRepo extends Effect.Service<WalletsRepo>()("Wallets/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const walletColumns = sql`id, account_kind, account_id, budget_usd, reserved_usd, spent_usd, enforced, version,
      last_sequence, created_at, updated_at`
    const entryColumns = sql`id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd, spent_after_usd,
      available_after_usd, session_id, task_id, note, repository_id, user_id, model, labels, grants, created_at`

    const findWallet = SqlSchema.findOne({
      Request: AccountRef,
      Result: WalletRow,
      execute: ({ id, kind }) =>
        sql`SELECT ${walletColumns} FROM wallets WHERE account_id = ${id} AND account_kind = ${kind}`
    })

    /** Safe under concurrent first reads: the loser of the race inserts nothing. */
    const insertWalletsIfAbsent = SqlSchema.void({
      Request: Schema.Array(AccountRef),
      execute: (accounts) =>
        sql`INSERT INTO wallets (account_kind, account_id)
            SELECT * FROM unnest(${accounts.map((a) => a.kind)}::account_kind[], ${accounts.map((a) => a.id)}::uuid[])
            ON CONFLICT (account_id) DO NOTHING`
    })

    /** Bounds every lock wait of the current transaction (D6: 2 s, then 503). */
    const limitLockWaits = sql`SELECT set_config('lock_timeout', ${LOCK_TIMEOUT}, true)`

    /**
     * Locks the wallet rows, in the order of their ids so that two
     * transactions locking overlapping sets never deadlock, waiting at most as
     * long as `limitLockWaits` allows, and sets that limit itself:
     * `set_config(..., true)` is `SET LOCAL`, and as a filter of the scan it
     * runs before the rows above it are locked, so the locks are bounded without
     * a round trip of their own. (No row, no wait.)
     */
    const lockWallets = SqlSchema.findAll({
      Request: Schema.Array(AccountRef),
      Result: LockedWalletRow,
      execute: (accounts) =>
        sql`SELECT ${walletColumns}, now() AS transaction_time FROM wallets
            WHERE (account_id, account_kind) IN (
                SELECT * FROM unnest(${accounts.map((a) => a.id)}::uuid[], ${
          accounts.map((a) => a.kind)
        }::account_kind[]))
              AND set_config('lock_timeout', ${LOCK_TIMEOUT}, true) IS NOT NULL
            ORDER BY id
            FOR UPDATE`
    })

    /**
     * Writes the balances of locked wallets and appends their entries in one statement, whatever
     * their number; answers how many entries it added. A wallet matches only while its newest entry
     * is still the one the caller read: a writer that does not hold the lock updates nothing and
     * appends nothing to it, which the caller sees in the count. The entries' `created_at`, like
     * the wallets' `updated_at`, is the transaction's `now()`.
     */
    const appendEntries = ({ entries, wallets: ws }: AppendEntries) =>
      entries.length === 0 ? Effect.succeed(0) : Effect.map(
        sql<{ readonly added: number }>`
          WITH ledger_wallets AS (
              UPDATE wallets w SET budget_usd = u.budget_usd, reserved_usd = u.reserved_usd, spent_usd = u.spent_usd,
                enforced = u.enforced, version = u.version, last_sequence = u.last_sequence, updated_at = now()
              FROM unnest(
                ${ws.map((u) => u.id)}::uuid[], ${ws.map((u) => u.read_sequence)}::bigint[],
                ${ws.map((u) => Money.format(u.budget_usd))}::numeric[],
                ${ws.map((u) => Money.format(u.reserved_usd))}::numeric[],
                ${ws.map((u) => Money.format(u.spent_usd))}::numeric[], ${ws.map((u) => u.enforced)}::boolean[],
                ${ws.map((u) => u.version)}::integer[], ${ws.map((u) => u.last_sequence)}::bigint[]
              ) AS u (id, read_sequence, budget_usd, reserved_usd, spent_usd, enforced, version, last_sequence)
              WHERE w.id = u.id AND w.last_sequence = u.read_sequence
              RETURNING w.id
            ), ledger_entries_added AS (
            INSERT INTO ledger_entries (id, wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
              spent_after_usd, available_after_usd, session_id, task_id, note, idempotency_key, repository_id, user_id,
              model, labels, grants)
            SELECT e.id, ledger_wallets.id, e.sequence, e.kind::ledger_entry_kind, e.amount_usd, e.budget_after_usd,
              e.reserved_after_usd, e.spent_after_usd, e.available_after_usd, e.session_id, e.task_id, e.note,
              e.idempotency_key, e.repository_id, e.user_id, e.model, e.labels, e.grants
            FROM unnest(
              ${entries.map((e) => e.id)}::uuid[], ${entries.map((e) => e.wallet_id)}::uuid[],
              ${entries.map((e) => e.sequence)}::bigint[], ${entries.map((e) => e.kind)}::text[],
              ${entries.map((e) => Money.format(e.amount_usd))}::numeric[],
              ${entries.map((e) => Money.format(e.budget_after_usd))}::numeric[],
              ${entries.map((e) => Money.format(e.reserved_after_usd))}::numeric[],
              ${entries.map((e) => Money.format(e.spent_after_usd))}::numeric[],
              ${entries.map((e) => Money.format(e.available_after_usd))}::numeric[],
              ${entries.map((e) => e.session_id)}::text[], ${entries.map((e) => e.task_id)}::text[],
              ${entries.map((e) => e.note)}::text[], ${entries.map((e) => e.idempotency_key)}::text[],
              ${entries.map((e) => e.repository_id)}::uuid[], ${entries.map((e) => e.user_id)}::uuid[],
              ${entries.map((e) => e.model)}::text[], ${entries.map((e) => storedLabelsText(e.labels))}::jsonb[],
              ${entries.map((e) => storedGrants(e.grants))}::jsonb[]
            ) AS e (id, wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd, spent_after_usd,
              available_after_usd, session_id, task_id, note, idempotency_key, repository_id, user_id, model, labels,
              grants)
            JOIN ledger_wallets ON ledger_wallets.id = e.wallet_id
            RETURNING id
          )
          SELECT count(*)::integer AS added FROM ledger_entries_added`,
        ([row]) => row?.added ?? 0
      )

    /**
     * A time as `DateTime.formatIso` writes it: UTC, to the millisecond, the rest cut as a JS
     * `Date` cuts it. The column name is the repository's own, never input.
     */
    const isoTime = (column: "created_at" | "updated_at") =>
      sql`to_char(${sql(column)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

    const formattedEntryColumns = sql`id, sequence::text AS sequence, ${isoTime("created_at")} AS created_at,
      kind::text AS kind, amount_usd::text AS amount_usd, budget_after_usd::text AS budget_after_usd,
      reserved_after_usd::text AS reserved_after_usd, spent_after_usd::text AS spent_after_usd,
      available_after_usd::text AS available_after_usd, session_id, task_id, note, repository_id::text AS repository_id,
      user_id::text AS user_id, model`

    /**
     * An entry's labels (D19) as compact JSON text, keys in order, `{}` when none: what
     * `JSON.stringify` writes of the labels a decoded row shows (`LabelsColumn`). Label keys are
     * ASCII, so the "C" collation orders them as JavaScript's sort does.
     */
    const labelsJson = sql`coalesce((SELECT '{' || string_agg(to_json(k)::text || ':' || to_json(v)::text, ','
      ORDER BY k COLLATE "C") || '}' FROM jsonb_each_text(labels) AS l (k, v)), '{}')`

    /**
     * An entry's grants (D21) as clients see them, compact JSON text in the stored order: each
     * item's grant and amount (a spend's `from_reserved_usd` stays in the books), `[]` when none.
     */
    const grantsJson = sql`coalesce((SELECT '[' || string_agg('{"grant_id":"' || (x ->> 'grant_id')
      || '","amount_usd":"' || (x ->> 'amount_usd') || '"}', ',' ORDER BY n) || ']'
      FROM jsonb_array_elements(grants) WITH ORDINALITY AS g (x, n)), '[]')`

    /**
     * An entry as the JSON ledger writes it, built as text by PostgreSQL: the fields in the
     * schema's order, strings escaped by `to_json`, amounts and times as `formattedEntryColumns`
     * gives them. `test/WalletsLedger.test.ts` proves it byte for byte what `LedgerPage` encodes.
     */
    const entryJson = sql`'{"id":"' || id || '","sequence":' || sequence || ',"kind":"' || kind
      || '","amount_usd":"' || amount_usd || '","budget_after_usd":"' || budget_after_usd
      || '","reserved_after_usd":"' || reserved_after_usd || '","spent_after_usd":"' || spent_after_usd
      || '","available_after_usd":"' || available_after_usd || '","payment_provider":null,"session_id":'
      || coalesce(to_json(session_id)::text, 'null') || ',"task_id":' || coalesce(to_json(task_id)::text, 'null')
      || ',"note":' || coalesce(to_json(note)::text, 'null')
      || ',"repository_id":' || coalesce('"' || repository_id || '"', 'null')
      || ',"user_id":' || coalesce('"' || user_id || '"', 'null')
      || ',"model":' || coalesce(to_json(model)::text, 'null') || ',"labels":' || ${labelsJson}
      || ',"grants":' || ${grantsJson}
      || ',"created_at":"' || ${isoTime("created_at")} || '"}'`

    /**
     * The wallet as the JSON the API sends, built by PostgreSQL like the ledger's page: what
     * `encodedWallet` writes (test/WalletsLedger.test.ts holds them equal), with no row parsed,
     * decoded and encoded again on the read clients poll most.
     */
    const findWalletJson = (account: { readonly kind: string; readonly id: string }) =>
      Effect.map(
        sql<{ readonly wallet: string }>`${sql.literal(PREPARED)}
          SELECT '{"id":"' || w.id || '","owner_kind":"' || w.account_kind || '","owner_id":"' || w.account_id
            || '","currency":"USD","budget_usd":"' || (w.budget_usd - due.free_usd) || '","reserved_usd":"'
            || w.reserved_usd || '","spent_usd":"' || w.spent_usd || '","available_usd":"'
            || (w.budget_usd - due.free_usd - w.reserved_usd - w.spent_usd)
            || '","enforced":' || w.enforced || ',"version":' || w.version
            || ',"created_at":"' || ${isoTime("created_at")} || '","updated_at":"' || ${isoTime("updated_at")}
            || '","next_expiry":' || coalesce('{"at":"'
              || to_char(next.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '","free_usd":"'
              || next.free_usd || '"}', 'null')
            || '}' AS wallet
          FROM wallets w
          -- A grant past its time is out of the budget from expires_at on (D21), before its entry is
          -- written; both lookups probe the moving grants' index, not every grant the wallet had.
          CROSS JOIN LATERAL (
            SELECT coalesce(sum(g.amount_usd - g.drawn_usd - g.held_usd - g.ended_usd), 0) AS free_usd
            FROM wallet_grants g
            WHERE g.wallet_id = w.id AND g.moving AND g.state = 'live' AND g.expires_at <= now()
          ) due
          LEFT JOIN LATERAL (
            SELECT g.expires_at, g.amount_usd - g.drawn_usd - g.held_usd - g.ended_usd AS free_usd
            FROM wallet_grants g
            WHERE g.wallet_id = w.id AND g.moving AND g.state = 'live' AND g.expires_at > now()
            ORDER BY g.expires_at, g.priority, g.category DESC, g.created_at, g.id LIMIT 1
          ) next ON true
          WHERE w.account_id = ${account.id} AND w.account_kind = ${account.kind}`,
        (rows) => Option.fromNullable(rows[0]?.wallet)
      )

    /**
     * A page of entries, newest first (keyset on sequence, D7), as the JSON the API sends: one
     * statement, one row and one string, so no entry is parsed, built or serialised in the
     * process. The account's wallet and the `before` entry are found in the same statement; none
     * when `before` is not an entry of this account's wallet (an account with no wallet yet has
     * an empty page).
     */
    const pageJson = (request: {
      readonly account: { readonly kind: string; readonly id: string }
      readonly before: string | null
      readonly limit: number
    }) => {
      const wallet = sql`(SELECT id FROM wallets WHERE account_id = ${request.account.id}
        AND account_kind = ${request.account.kind})`
      const [anchor, older, beforeUnknown] = request.before === null
        ? [sql``, sql``, sql`false`]
        : [
          sql`anchor AS (SELECT sequence FROM ledger_entries WHERE wallet_id = ${wallet} AND id = ${request.before}),`,
          sql`AND sequence < (SELECT sequence FROM anchor)`,
          sql`NOT EXISTS (SELECT 1 FROM anchor)`
        ]
      return Effect.map(
        sql<{ readonly page: string | null }>`
          WITH ${anchor} page AS (
            SELECT ledger_entries.sequence, id, ${entryJson} AS entry FROM ledger_entries
            WHERE wallet_id = ${wallet} ${older}
            ORDER BY ledger_entries.wallet_id, ledger_entries.sequence DESC LIMIT ${request.limit + 1}
          ), shown AS (SELECT * FROM page ORDER BY page.sequence DESC LIMIT ${request.limit})
          SELECT CASE WHEN ${beforeUnknown} THEN NULL ELSE
            '{"entries":[' || coalesce((SELECT string_agg(entry, ',' ORDER BY shown.sequence DESC) FROM shown), '')
            || '],"next_before":' || CASE WHEN (SELECT count(*) FROM page) > ${request.limit}
              THEN (SELECT '"' || id || '"' FROM shown ORDER BY shown.sequence LIMIT 1) ELSE 'null' END
            || '}' END AS page`,
        (rows) => Option.fromNullable(rows[0]?.page)
      )
    }

    /**
     * One page of the export (D13): the wallet's entries after the sequence `after`, oldest
     * first, at most `limit` (keyset on the sequence's index). Each page is a statement of its
     * own on a pooled connection held for milliseconds, so an export of any size, read however
     * slowly, never keeps a connection (issue 22). Formatted by PostgreSQL (amounts at their six
     * decimals, times in ISO 8601 UTC to the millisecond, as the JSON ledger writes them), so no
     * row is decoded to be encoded again.
     */
    const exportPage = (
      request: {
        readonly wallet_id: string
        readonly from: Date | null
        readonly to: Date | null
        readonly after: string
        readonly limit: number
      }
    ) => {
      const [from, to] = [request.from?.toISOString() ?? null, request.to?.toISOString() ?? null]
      return sql<ExportRow>`
        SELECT ${formattedEntryColumns}, idempotency_key, ${labelsJson} AS labels, ${grantsJson} AS grants
        FROM ledger_entries
        WHERE wallet_id = ${request.wallet_id} AND sequence > ${request.after}::bigint
          AND (${from}::timestamptz IS NULL OR created_at >= ${from}::timestamptz)
          AND (${to}::timestamptz IS NULL OR created_at < ${to}::timestamptz)
        ORDER BY ledger_entries.wallet_id, ledger_entries.sequence
        LIMIT ${request.limit}`
    }

    /**
     * The entry of the account's wallet that its balances at `time` are the after-values of (D19):
     * of the entries created before the millisecond after `time` (an entry is at the millisecond
     * its `created_at` shows), the latest, ties by the greatest sequence. Entries' `created_at`
     * is their transaction's start, so it is not strictly in sequence order; this rule needs no
     * such order. One backward probe of `ledger_entries_wallet_time_idx` (migration 0021),
     * whatever the ledger's length; none when the wallet had no entry by then, or there is no
     * wallet.
     */
    const entryAsOf = SqlSchema.findOne({
      Request: Schema.Struct({ account: AccountRef, time: Schema.String }),
      Result: EntryBalances,
      execute: ({ account, time }) =>
        sql`SELECT id, sequence, budget_after_usd, reserved_after_usd, spent_after_usd, available_after_usd
            FROM ledger_entries
            WHERE wallet_id = (SELECT id FROM wallets WHERE account_id = ${account.id} AND account_kind = ${account.kind})
              AND created_at < ${time}::timestamptz + interval '1 millisecond'
            ORDER BY wallet_id DESC, created_at DESC, sequence DESC
            LIMIT 1`
    })

    /** A session's entries, oldest first. */
    const sessionEntries = SqlSchema.findAll({
      Request: Schema.Struct({ wallet_id: Schema.String, session_id: Schema.String, limit: Schema.Int }),
      Result: LedgerEntryRow,
      execute: ({ limit, session_id, wallet_id }) =>
        sql`SELECT ${entryColumns} FROM ledger_entries WHERE wallet_id = ${wallet_id} AND session_id = ${session_id}
            ORDER BY sequence LIMIT ${limit}`
    })

    /** Which of the sessions have a reserve or a spend entry: were ever funded (D12's refused sessions). */
    const fundedSessions = SqlSchema.findAll({
      Request: Schema.Struct({ wallet_id: Schema.String, session_ids: Schema.Array(Schema.String) }),
      Result: Schema.Struct({ session_id: Schema.String }),
      execute: ({ session_ids, wallet_id }) =>
        sql`SELECT DISTINCT session_id FROM ledger_entries
            WHERE wallet_id = ${wallet_id} AND session_id = ANY(${session_ids}::text[]) AND kind IN ('reserve', 'spend')`
    })

    /**
     * Claims an idempotency key for the rest of the transaction without
     * waiting: false while another transaction holds it. Released by commit or
     * rollback, and by the server when a connection dies, so a crash never
     * leaves a key stuck.
     */
    const tryClaimKey = SqlSchema.single({
      Request: Schema.Struct({ account: AccountRef, key: Schema.String }),
      Result: Schema.Struct({ claimed: Schema.Boolean }),
      execute: ({ account, key }) =>
        sql`SELECT pg_try_advisory_xact_lock(
              hashtextextended('wallet_idempotency:' || ${account.kind}::text || ':' || ${account.id}::text || ':' || ${key}::text, 0)
            ) AS claimed`
    })

    const findIdempotencyRecord = SqlSchema.findOne({
      Request: Schema.Struct({ account: AccountRef, key: Schema.String }),
      Result: IdempotencyRecord,
      execute: ({ account, key }) =>
        sql`SELECT endpoint, request_fingerprint, response_body FROM wallet_idempotency
            WHERE account_kind = ${account.kind} AND account_id = ${account.id} AND key = ${key}`
    })

    const insertIdempotencyRecord = SqlSchema.void({
      Request: Schema.Struct({
        account: AccountRef,
        key: Schema.String,
        endpoint: Schema.String,
        request_fingerprint: Schema.String,
        /** The result as JSON text, stored verbatim. */
        response_body: Schema.String
      }),
      execute: (r) =>
        sql`INSERT INTO wallet_idempotency (account_kind, account_id, key, endpoint, request_fingerprint, response_body)
            VALUES (${r.account.kind}, ${r.account.id}, ${r.key}, ${r.endpoint}, ${r.request_fingerprint},
              ${r.response_body}::json)`
    })

    return {
      findWallet: orDefect(findWallet),
      insertWalletsIfAbsent: (accounts: Parameters<typeof insertWalletsIfAbsent>[0]) =>
        lockTimeoutIsBusy(insertWalletsIfAbsent(accounts)),
      limitLockWaits: Effect.orDie(limitLockWaits),
      lockWallets: (accounts: Parameters<typeof lockWallets>[0]) => lockTimeoutIsBusy(lockWallets(accounts)),
      appendEntries: orDefect(appendEntries),
      sessionEntries: orDefect(sessionEntries),
      fundedSessions: orDefect(fundedSessions),
      entryAsOf: orDefect(entryAsOf),
      findWalletJson: orDefect(findWalletJson),
      pageJson: orDefect(pageJson),
      exportPage: orDefect(exportPage),
      tryClaimKey: orDefect(tryClaimKey),
      findIdempotencyRecord: orDefect(findIdempotencyRecord),
      insertIdempotencyRecord: (record: Parameters<typeof insertIdempotencyRecord>[0]) =>
        Effect.catchAll(
          insertIdempotencyRecord(record),
          (error) => isSqlError(error) && isUniqueViolation(error) ? Effect.fail(new KeyRecorded()) : Effect.die(error)
        )
    } as const
  })
}) {}
