import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { call, TestApp } from "./support/TestApp.js"

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/** The console's files as the API serves them (D20): one page, hashed assets, their headers. */
layer(TestApp(), { excludeTestServices: true })("the console's page and assets (D20)", (it) => {
  it.effect("/console is the built page, no-cache, under the CSP; the files it names are immutable", () =>
    Effect.gen(function*() {
      const page = yield* call("GET", "/console")
      expect(page.status).toBe(200)
      expect(page.headers["content-type"]).toMatch(/^text\/html/)
      expect(page.headers["cache-control"]).toBe("no-cache")
      expect(page.headers["content-security-policy"]).toBe(CSP)
      expect(page.headers["x-content-type-options"]).toBe("nosniff")
      const html = String(page.body)
      // No inline script or style: only the hashed files, from this origin.
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
      expect(html).not.toMatch(/<style|\bstyle=/)
      const assets = [...html.matchAll(/(?:src|href)="(console\/assets\/[^"]+)"/g)].map(([, asset]) => asset ?? "")
      expect(assets.map((asset) => asset.replace(/-[A-Z0-9]{8}\./, "-HASH."))).toEqual([
        "console/assets/favicon-HASH.svg",
        "console/assets/main-HASH.css",
        "console/assets/main-HASH.js"
      ])
      for (const asset of assets) {
        const file = yield* call("GET", `/${asset}`)
        expect(file.status).toBe(200)
        expect(file.headers["cache-control"]).toBe("public, max-age=31536000, immutable")
        expect(file.headers["content-type"]).toMatch(
          asset.endsWith(".js")
            ? /^(text|application)\/javascript/
            : asset.endsWith(".svg")
            ? /^image\/svg\+xml/
            : /^text\/css/
        )
        expect(file.headers["x-content-type-options"]).toBe("nosniff")
      }
    }))

  it.effect("another method than GET is 405 with Allow (D15)", () =>
    Effect.gen(function*() {
      for (const path of ["/console", "/console/assets/main-ABCDEFGH.js"]) {
        const refused = yield* call("POST", path, { body: {} })
        expect(refused.status).toBe(405)
        expect(refused.headers["allow"]).toBe("GET, HEAD")
      }
    }))

  it.effect("/console/ leads to /console; an unknown or outside file is a 404 problem", () =>
    Effect.gen(function*() {
      const slash = yield* call("GET", "/console/")
      expect(slash.status).toBe(301)
      expect(slash.headers["location"]).toBe("../console")
      for (
        const path of [
          "/console/assets/main-NOTTHERE.js",
          "/console/assets/manifest.json",
          "/console/assets/..%2Findex.html"
        ]
      ) {
        const missing = yield* call("GET", path)
        expect(missing.status).toBe(404)
        expect(missing.body).toMatchObject({ code: "not_found" })
      }
    }))
})

const consoleSources = readdirSync(path.join(ROOT, "console"), { recursive: true, encoding: "utf8" })
  .filter((file) => /\.tsx?$/.test(file))

/** The console shows amounts as the strings the API sends (D20): nothing in it turns text into a binary number. */
describe("the console's code", () => {
  it("finds its sources (a rule over nothing would pass for nothing)", () => {
    expect(consoleSources).toEqual(expect.arrayContaining(["format.ts", "session.ts", "pages/Spend.tsx"]))
  })

  it("never parses text as a number: no Number(), parseFloat, parseInt or unary plus on a value", () => {
    const parses = consoleSources.flatMap((file) =>
      readFileSync(path.join(ROOT, "console", file), "utf8").split("\n").flatMap((line, index) =>
        /\bNumber\s*\(|\bparse(Float|Int)\b|\bNumber\.parse|[=(,:?]\s*\+\s*[\w.[\]]+/.test(line)
          ? [`console/${file}:${index + 1}: ${line.trim()}`]
          : []
      )
    )
    // One parse is allowed, in format.ts, of a whole number a person typed (a percentage, a count), never an amount.
    const [wholeNumber, ...offenders] = parses
    expect(wholeNumber).toMatch(/^console\/format\.ts:\d+: export const wholeNumber = /)
    expect(offenders).toEqual([])
  })
})
