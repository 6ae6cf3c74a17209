import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    // Each file gets its own database and Redis prefix, so files run in parallel.
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // What a test prints (the in-process service's request log, above all) is shown only when it
    // fails: a run's output is its results, and a failure's context. Child processes' output is
    // kept likewise (test/support/processes.ts).
    silent: "passed-only",
    // Argon2 and Postgres work compete for two cores; one fork per core keeps timings sane.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } }
  }
})
