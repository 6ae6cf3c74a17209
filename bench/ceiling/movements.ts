import type pg from "pg"
import * as Money from "../../src/Domain/Money.js"
import { endQuietly, openClient } from "../lib/pg.js"

/**
 * The ceiling for settlement: plain `pg`, no queue, no Effect, one
 * transaction per movement on the service's own tables, as a careful
 * hand-written settlement would do it:
 *
 *   BEGIN
 *   SELECT … FROM wallets WHERE id = $1 FOR UPDATE      -- the wallet's row lock
 *   UPDATE wallets SET reserved_usd, spent_usd, last_sequence …
 *   INSERT INTO ledger_entries (… sequence = last_sequence + 1 …)
 *   COMMIT
 *
 * It keeps no idempotency records and no session rows, so it does less than
 * the worker must; what it cannot avoid is one lock, one commit (one WAL
 * flush) per movement. On one hot wallet those commits queue behind the row
 * lock, which is what batching a wallet's jobs into one transaction beats.
 */

/** The amounts of one cycle: reserve, spend part of the hold, release the rest. */
export const CYCLE = {
  reserve: Money.decimal("1.000000"),
  spend: Money.decimal("0.400000"),
  release: Money.decimal("0.600000")
} as const

interface WalletRow {
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly last_sequence: string
}

type Kind = "reserve" | "spend" | "reserve_release"

const LOCK = `SELECT budget_usd, reserved_usd, spent_usd, last_sequence FROM wallets WHERE id = $1 FOR UPDATE`
const UPDATE =
  `UPDATE wallets SET reserved_usd = $2, spent_usd = $3, last_sequence = $4, updated_at = now() WHERE id = $1`
const INSERT = `INSERT INTO ledger_entries (wallet_id, sequence, kind, amount_usd, budget_after_usd, reserved_after_usd,
                  spent_after_usd, available_after_usd, session_id)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

/** One movement in one transaction. */
const move = async (client: pg.Client, walletId: string, kind: Kind, sessionId: string): Promise<void> => {
  await client.query("BEGIN")
  try {
    const { rows } = await client.query<WalletRow>(LOCK, [walletId])
    const row = rows[0]
    if (row === undefined) throw new Error(`no ceiling wallet ${walletId}`)
    const budget = Money.decimal(row.budget_usd)
    let reserved = Money.decimal(row.reserved_usd)
    let spent = Money.decimal(row.spent_usd)
    let amount: Money.Decimal
    switch (kind) {
      case "reserve":
        amount = CYCLE.reserve
        reserved = reserved.plus(amount)
        break
      case "spend":
        amount = CYCLE.spend
        reserved = reserved.minus(amount)
        spent = spent.plus(amount)
        break
      case "reserve_release":
        amount = CYCLE.release
        reserved = reserved.minus(amount)
        break
    }
    const sequence = Number(row.last_sequence) + 1
    await client.query(UPDATE, [walletId, Money.format(reserved), Money.format(spent), sequence])
    await client.query(INSERT, [
      walletId,
      sequence,
      kind,
      Money.format(amount),
      Money.format(budget),
      Money.format(reserved),
      Money.format(spent),
      Money.format(budget.minus(reserved).minus(spent)),
      sessionId
    ])
    await client.query("COMMIT")
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined)
    throw error
  }
}

export interface CycleRun {
  /** Movements per second over the run. */
  readonly movementsPerSecond: number
  /** Each movement's transaction, BEGIN to COMMIT, in milliseconds. */
  readonly latencies: Array<number>
  readonly movements: number
  /** Cycles run: 0 … n-1. */
  readonly cycles: number
}

/**
 * `clients` connections of their own, one per concurrent cycle, so the
 * ceiling has exactly the concurrency of the runners it is compared with.
 */
export const openCeiling = async (databaseUrl: string, clients: number) => {
  const connections = await Promise.all(Array.from({ length: clients }, async () => {
    return openClient({ connectionString: databaseUrl, application_name: "account-api-bench-ceiling" })
  }))

  /**
   * `cycles` reserve → spend → release cycles, each a session of its own, cycle
   * `i` on `walletIds[i % walletIds.length]`; every client takes the next cycle
   * when it has finished its last, and none after `seconds` when given.
   */
  const runCycles = async (
    walletIds: ReadonlyArray<string>,
    cycles: number,
    label: string,
    seconds?: number
  ): Promise<CycleRun> => {
    const latencies: Array<number> = []
    let next = 0
    const started = performance.now()
    const deadline = seconds === undefined ? Number.POSITIVE_INFINITY : started + seconds * 1000
    const take = () => (performance.now() < deadline && next < cycles ? next++ : cycles)
    await Promise.all(connections.map(async (client) => {
      for (let cycle = take(); cycle < cycles; cycle = take()) {
        const walletId = walletIds[cycle % walletIds.length]
        if (walletId === undefined) throw new Error("no ceiling wallets")
        const sessionId = `${label}-${cycle}`
        for (const kind of ["reserve", "spend", "reserve_release"] as const) {
          const begun = performance.now()
          await move(client, walletId, kind, sessionId)
          latencies.push(performance.now() - begun)
        }
      }
    }))
    const elapsed = (performance.now() - started) / 1000
    return {
      movementsPerSecond: latencies.length / elapsed,
      latencies,
      movements: latencies.length,
      cycles: Math.min(next, cycles)
    }
  }

  const close = () => Promise.all(connections.map(endQuietly)).then(() => undefined)

  return { runCycles, close } as const
}
