import { setTimeout as sleep } from "node:timers/promises"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { Cleanup } from "../bench/lib/cleanup.js"
import { endQuietly, openClient } from "../bench/lib/pg.js"
import { createDatabase } from "../bench/lib/stores.js"

/**
 * The bench's clean-up on a connection the server ends: a run stopped at its limit drops its
 * database WITH (FORCE) while suites still hold clients on it, and PostgreSQL ends those
 * backends (57P01), which `pg` reports as an `error` event. Without a listener that event is an
 * uncaught exception and the clean-up dies half-way.
 */

const uncaught: Array<unknown> = []
const record = (error: unknown) => uncaught.push(error)

beforeEach(() => {
  uncaught.length = 0
  process.on("uncaughtException", record)
})
afterEach(() => {
  process.off("uncaughtException", record)
})

const databaseNameOf = (url: string) => new URL(url).pathname.slice(1)

/** Waits until `check` holds, for at most five seconds. */
const eventually = async (check: () => Promise<boolean> | boolean) => {
  for (let tries = 0; tries < 100; tries++) {
    if (await check()) return
    await sleep(50)
  }
  throw new Error("never")
}

describe("the bench's clean-up", () => {
  it("survives a client whose backend is terminated (pg_terminate_backend)", async () => {
    const cleanup = new Cleanup()
    try {
      const url = await createDatabase(cleanup)
      const client = await openClient({ connectionString: url, application_name: "bench test victim" })
      const killer = await openClient({ connectionString: url, application_name: "bench test killer" })
      const { rows: [victim] } = await client.query<{ readonly pid: number }>("SELECT pg_backend_pid() AS pid")
      const { rows: [terminated] } = await killer.query<{ readonly done: boolean }>(
        "SELECT pg_terminate_backend($1) AS done",
        [victim?.pid]
      )
      expect(terminated?.done).toBe(true)
      // The backend's goodbye (57P01) arrives as an `error` event, then the socket closes.
      await eventually(async () => (await client.query("SELECT 1").then(() => false, () => true)))
      await sleep(200)
      await endQuietly(client)
      await endQuietly(killer)
      expect(uncaught).toEqual([])
    } finally {
      await cleanup.runAll()
    }
  })

  it("drops the database WITH (FORCE) after every other step, with clients still on it", async () => {
    const cleanup = new Cleanup()
    const order: Array<string> = []
    cleanup.defer("server", () => {
      order.push("server")
      return Promise.resolve()
    }, { last: true })
    const url = await createDatabase(cleanup)
    const name = databaseNameOf(url)
    cleanup.defer("process", () => {
      order.push("process")
      return Promise.resolve()
    })
    // Left open, as a suite stopped at the run's limit leaves its clients.
    const left = await Promise.all([1, 2, 3].map(() => openClient({ connectionString: url })))
    const observer = await openClient({ connectionString: url.replace(`/${name}`, "/postgres") })
    try {
      await cleanup.runAll()
      const { rows } = await observer.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])
      expect(rows).toEqual([])
      expect(order).toEqual(["process", "server"])
      await Promise.all(left.map((client) => expect(client.query("SELECT 1")).rejects.toThrow()))
      // The ended connections' error events have had time to arrive.
      await sleep(200)
      expect(uncaught).toEqual([])
    } finally {
      await Promise.all(left.map(endQuietly))
      await endQuietly(observer)
    }
  })

  it("runs its last steps after the others when asked twice at once (the limit and the run's own end)", async () => {
    const cleanup = new Cleanup()
    const order: Array<string> = []
    cleanup.defer("drop the database", () => {
      order.push("drop")
      return Promise.resolve()
    }, { last: true })
    cleanup.defer("stop the worker", async () => {
      await sleep(200)
      order.push("worker stopped")
    })
    cleanup.defer("close a client", () => {
      order.push("client closed")
      return Promise.resolve()
    })
    await Promise.all([cleanup.runAll(), cleanup.runAll()])
    expect(order).toEqual(["client closed", "worker stopped", "drop"])
  })
})
