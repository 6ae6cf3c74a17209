import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    // Each file gets its own database and Redis prefix, so files run in parallel.
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Argon2 and Postgres work compete for two cores; one fork per core keeps timings sane.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } }
  }
})
