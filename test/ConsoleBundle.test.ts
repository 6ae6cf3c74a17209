import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { gzipSync } from "node:zlib"
import { ROOT } from "../scripts/programs.mjs"

/** Issue 42's budget: what the console adds to a browser's downloads, gzipped. */
const BUDGET_GZIP_BYTES = 250_000

const BUILT = path.join(ROOT, "dist", "console")

interface Manifest {
  readonly files: ReadonlyArray<{ readonly file: string; readonly bytes: number; readonly gzip_bytes: number }>
  readonly total: { readonly bytes: number; readonly gzip_bytes: number }
}

/**
 * The build's manifest (scripts/build-console.mjs), which docs/console.md quotes: it lists every
 * file the console's page makes a browser download, each size as the file has it, and the total
 * stays under the budget.
 */
describe("the console's bundle (D20)", () => {
  const manifest: Manifest = JSON.parse(readFileSync(path.join(BUILT, "manifest.json"), "utf8"))

  it("lists the page and every file of assets/, with their sizes raw and gzipped", () => {
    const built = ["index.html", ...readdirSync(path.join(BUILT, "assets")).map((file) => `assets/${file}`)]
    expect(manifest.files.map((entry) => entry.file).sort()).toEqual(built.sort())
    for (const entry of manifest.files) {
      const bytes = readFileSync(path.join(BUILT, entry.file))
      expect(entry.bytes).toBe(bytes.length)
      expect(entry.gzip_bytes).toBe(gzipSync(bytes, { level: 9 }).length)
    }
    const sum = (of: (entry: Manifest["files"][number]) => number) =>
      manifest.files.reduce((total, entry) => total + of(entry), 0)
    expect(manifest.total).toEqual({ bytes: sum((entry) => entry.bytes), gzip_bytes: sum((entry) => entry.gzip_bytes) })
  })

  it(`adds less than ${BUDGET_GZIP_BYTES / 1000} kB gzipped to what a browser downloads`, () => {
    console.log(
      `the console: ${(manifest.total.gzip_bytes / 1000).toFixed(1)} kB gzipped ` +
        `(${(manifest.total.bytes / 1000).toFixed(1)} kB raw) in ${manifest.files.length} files`
    )
    expect(manifest.total.gzip_bytes).toBeLessThan(BUDGET_GZIP_BYTES)
  })
})
