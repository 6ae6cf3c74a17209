import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { childEnvironment } from "./support/childEnvironment.js"

const FIXTURE = "test/fixtures/quiet-output"

/** This run's environment, but plain text: vitest colours its output when its parent's is coloured. */
const plainEnvironment = childEnvironment({ NO_COLOR: "1" })

/** Runs the fixture's tests in a vitest of their own; resolves to its exit code and what it printed. */
const runFixture = () =>
  new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
    const run = spawn(
      process.execPath,
      [path.join(ROOT, "node_modules/vitest/vitest.mjs"), "run", "--config", `${FIXTURE}/vitest.config.ts`, FIXTURE],
      { cwd: ROOT, env: plainEnvironment, stdio: ["ignore", "pipe", "pipe"] }
    )
    let output = ""
    run.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    run.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    run.once("exit", (code) => resolve({ code, output }))
  })

describe("the test run's output", () => {
  it("shows a failing test's service log, in-process and child process, and not a passing test's", async () => {
    const { code, output } = await runFixture()
    expect(code, output).toBe(1)
    expect(output, output).toMatch(/1 failed \| 1 passed/)
    // Request log lines carry the request id each test sent.
    const linesWith = (marker: string) => output.split("\n").filter((line) => line.includes(marker))
    expect(linesWith("quiet-output-passing"), output).toEqual([])
    expect(linesWith("quiet-output-failing-in-process").length, output).toBeGreaterThan(0)
    expect(linesWith("quiet-output-failing-child-process").length, output).toBeGreaterThan(0)
  }, 240_000)
})
