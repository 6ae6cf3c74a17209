import { describe, expect, it } from "vitest"
import { RowKeeper } from "../bench/lib/keeper.js"
import type { RoundFigures } from "../bench/lib/load.js"
import { figuresOf } from "../bench/lib/load.js"
import type { Row } from "../bench/lib/suite.js"

/**
 * What a run stopped at its limit reports of the suite it stopped in: every row and ratio the
 * suite kept as it measured them (`bench/lib/keeper.ts`), a row of the rounds so far replaced in
 * its place by the row of more rounds.
 */

const round = (rps: number): RoundFigures => ({ rps, p50_ms: 1, p99_ms: 2, requests: 100 })

const row = (server: string, rounds: ReadonlyArray<RoundFigures>): Row => ({
  suite: "settlement",
  request: "reserve+spend+release, 1 hot wallet",
  server,
  connections: 32,
  ...figuresOf(rounds),
  rounds
})

describe("the bench's row keeping", () => {
  it("keeps each part's rows as they are measured, the latest of a server in its place", () => {
    const kept = new RowKeeper()
    kept.add({ rows: [row("worker", [round(100)])], ratios: {} }, "hot")
    kept.add({ rows: [row("worker", [round(100)]), row("pg ceiling", [round(200)])], ratios: { a: 0.5 } }, "hot")
    expect(kept.result().rows.map((r) => [r.server, r.rounds.length])).toEqual([["worker", 1], ["pg ceiling", 1]])
    // The next part's rows go after, and a later round of the first part replaces its rows in place.
    kept.add({ rows: [row("worker", [round(300)])], ratios: { b: 1 } }, "spread")
    kept.add({ rows: [row("worker", [round(100), round(110)])], ratios: { a: 0.55 } }, "hot")
    const { ratios, rows } = kept.result()
    expect(rows.map((r) => [r.server, r.rounds.length, r.rps.median])).toEqual([
      ["worker", 2, 105],
      ["pg ceiling", 1, 200],
      ["worker", 1, 300]
    ])
    expect(ratios).toEqual({ a: 0.55, b: 1 })
  })

  it("leaves out a ratio that could not be computed yet", () => {
    const kept = new RowKeeper()
    kept.ratio("settlement_hot_vs_ceiling", undefined)
    kept.ratio("settlement_planning_share", Number.NaN)
    kept.ratio("settlement_two_workers_hot_vs_one", 0.5)
    expect(kept.result().ratios).toEqual({ settlement_two_workers_hot_vs_one: 0.5 })
  })

  it("replaces everything with a suite's whole result, as a suite that reports all it has does", () => {
    const kept = new RowKeeper()
    kept.add({ rows: [row("worker", [round(1)])], ratios: { a: 1 } }, "hot")
    kept.all({ rows: [row("api", [round(2)]), row("baseline", [round(3)])], ratios: { c: 2 } })
    expect(kept.result().rows.map((r) => r.server)).toEqual(["api", "baseline"])
    expect(kept.result().ratios).toEqual({ c: 2 })
  })
})
