import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { childEnvironment } from "./support/childEnvironment.js"

const testSources = (dir: string): ReadonlyArray<string> =>
  readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`
    if (entry.isDirectory()) return file === "test/fixtures" ? [] : testSources(file)
    return /\.(ts|mts|mjs)$/.test(entry.name) ? [file] : []
  })

/** The ways a test could hand its own run's environment to a program it starts. */
const HANDS_DOWN_THE_RUN = [
  /\.\.\.process\.env\b/,
  /\benv:\s*process\.env\b/,
  /Object\.entries\(process\.env\)/,
  /[A-Z_]+:\s*process\.env\.[A-Z_]+/
]

describe("what a program started by a test inherits", () => {
  it("no test hands its run's environment to a child: children get childEnvironment and what the test names", () => {
    // The helper reads the run's environment, and this file poisons it on purpose.
    const files = testSources("test").filter((file) =>
      file !== "test/support/childEnvironment.ts" && file !== "test/TestEnvironment.test.ts"
    )
    expect(files.length).toBeGreaterThan(50)
    const offenders = files.flatMap((file) => {
      const lines = readFileSync(path.join(ROOT, file), "utf8").split("\n")
      return lines.flatMap((line, index) =>
        HANDS_DOWN_THE_RUN.some((pattern) => pattern.test(line)) ? [`${file}:${index + 1}: ${line.trim()}`] : []
      )
    })
    expect(offenders).toEqual([])
  })

  it("set-up's re-run marker, npm's and vitest's variables stay in the run; a shell's and the named ones pass", () => {
    const saved = { ...process.env }
    try {
      Object.assign(process.env, {
        ACCOUNT_API_SETUP_RERUN_FROM: "20.20.2",
        npm_lifecycle_event: "test",
        npm_config_loglevel: "silent",
        INIT_CWD: ROOT,
        VITEST_POOL_ID: "1",
        NODE_ENV: "test",
        HOME: "/home/someone",
        LC_ALL: "C.UTF-8"
      })
      const env = childEnvironment({ PORT: "8080", NODE_ENV: "production" })
      expect(Object.keys(env).filter((name) => /^(ACCOUNT_API_SETUP_|npm_|INIT_CWD|VITEST)/.test(name))).toEqual([])
      expect(env).toMatchObject({
        PATH: process.env.PATH,
        HOME: "/home/someone",
        LC_ALL: "C.UTF-8",
        PORT: "8080",
        NODE_ENV: "production"
      })
      expect(childEnvironment().NODE_ENV).toBeUndefined()
    } finally {
      for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name]
      Object.assign(process.env, saved)
    }
  })
})
