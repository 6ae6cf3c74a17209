import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

/**
 * The repository stands on its own: every decision the README, the code and the tests cite
 * ("D8") is defined by a heading under `docs/`, every relative link of the README and the
 * documents leads somewhere, and no file names a path outside the repository.
 */

const ROOT = fileURLToPath(new URL("..", import.meta.url))

/** Never read: installed, generated, or local to one machine. */
const SKIPPED = new Set(["node_modules", ".git", ".data", "dist", "artifacts"])
const isSkipped = (name: string) => SKIPPED.has(name) || name.startsWith(".dist-") || name.endsWith(".cpuprofile")

/** Every file under `dir` (repository-relative), but what `SKIPPED` names. */
const filesUnder = (dir: string): ReadonlyArray<string> => {
  const path = join(ROOT, dir)
  if (!existsSync(path)) return []
  if (statSync(path).isFile()) return [dir]
  return readdirSync(path, { withFileTypes: true }).flatMap((entry) =>
    isSkipped(entry.name) ? [] : filesUnder(dir === "" ? entry.name : join(dir, entry.name))
  )
}

/** A file's text, or undefined for a binary file (one holding a NUL byte). */
const textOf = (file: string): string | undefined => {
  const bytes = readFileSync(join(ROOT, file))
  return bytes.includes(0) ? undefined : bytes.toString("utf8")
}

const DOCS = filesUnder("docs").filter((file) => file.endsWith(".md"))
const MARKDOWN = ["README.md", "CHANGELOG.md", ...DOCS].filter((file) => existsSync(join(ROOT, file)))

/** Where decisions are cited: the README, the code, the tests and the files that build and run them. */
const CITING = [
  "README.md",
  "CHANGELOG.md",
  "src",
  "workers",
  "scripts",
  "migrations",
  "bench",
  "test",
  ".ci",
  "Dockerfile",
  "docker-compose.yml",
  ".env.example"
].flatMap(filesUnder)

const CITATION = /\bD([0-9]{1,2})\b/g

/** Each cited decision number with the first few places that cite it. */
const citations = (): ReadonlyMap<number, ReadonlyArray<string>> => {
  const cited = new Map<number, Array<string>>()
  for (const file of CITING) {
    const lines = (textOf(file) ?? "").split("\n")
    lines.forEach((line, index) => {
      for (const [, number] of line.matchAll(CITATION)) {
        const places = cited.get(Number(number)) ?? []
        places.push(`${file}:${index + 1}`)
        cited.set(Number(number), places)
      }
    })
  }
  return cited
}

/** Lines outside fenced code blocks, so examples in code are not read as links or headings. */
const proseLines = (text: string): ReadonlyArray<{ readonly line: string; readonly number: number }> => {
  let fenced = false
  return text.split("\n").flatMap((line, index) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced
      return []
    }
    return fenced ? [] : [{ line, number: index + 1 }]
  })
}

/** The original specification's sections as the code cites them: "seed §2.5", "seed §4.4–4.8". */
const SECTION_CITATION = /\bseed §?([0-9]+(?:\.[0-9]+)?)(?:\s*[–-]\s*([0-9]+(?:\.[0-9]+)?))?/g

/** Each cited section of the specification with the places that cite it. */
const sectionCitations = (): ReadonlyMap<string, ReadonlyArray<string>> => {
  const cited = new Map<string, Array<string>>()
  for (const file of CITING) {
    const lines = (textOf(file) ?? "").split("\n")
    lines.forEach((line, index) => {
      for (const [, first, last] of line.matchAll(SECTION_CITATION)) {
        for (const section of [first, last]) {
          if (section === undefined) continue
          cited.set(section, [...(cited.get(section) ?? []), `${file}:${index + 1}`])
        }
      }
    })
  }
  return cited
}

/** The sections `docs/contract.md` numbers as the specification did: headings `## 2.`/`### 2.5`, endpoint rows `| 4.10 |`, paragraphs `4.13 …`. */
const contractSections = (): ReadonlySet<string> =>
  new Set(
    proseLines(textOf(join("docs", "contract.md")) ?? "").flatMap(({ line }) => {
      const match = /^(?:#{1,6} |\| )?([0-9]+(?:\.[0-9]+)?)\.? /.exec(line)
      return match?.[1] === undefined ? [] : [match[1]]
    })
  )

/** The decision numbers defined: a heading `# D<n> Title` in a document under `docs/`. */
const definitions = (): ReadonlyMap<number, string> =>
  new Map(
    DOCS.flatMap((file) =>
      proseLines(textOf(file) ?? "").flatMap(({ line }) => {
        const match = /^#{1,6} D([0-9]{1,2}) \S/.exec(line)
        return match === null ? [] : [[Number(match[1]), file] as const]
      })
    )
  )

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
const anchorsOf = (file: string): ReadonlySet<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const { line } of proseLines(textOf(file) ?? "")) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const slug = (heading[1] ?? "").toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

interface Link {
  readonly file: string
  readonly line: number
  readonly target: string
}

/** The relative links of a Markdown file (inline `[text](target)`), outside code. */
const relativeLinks = (file: string): ReadonlyArray<Link> =>
  proseLines(textOf(file) ?? "").flatMap(({ line, number }) =>
    [...line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].flatMap(([, target]) =>
      target === undefined || /^[a-z][a-z0-9+.-]*:/i.test(target) ? [] : [{ file, line: number, target }]
    )
  )

/** Why a link leads nowhere, or undefined when it resolves. */
const brokenLink = (file: string, target: string): string | undefined => {
  const [path = "", anchor] = target.split("#")
  const resolved = path === "" ? join(ROOT, file) : resolve(ROOT, dirname(file), decodeURIComponent(path))
  if (!resolved.startsWith(ROOT) && `${resolved}${sep}` !== ROOT) return "leads outside the repository"
  if (!existsSync(resolved)) return `no file ${relative(ROOT, resolved)}`
  if (anchor === undefined || anchor === "" || !resolved.endsWith(".md")) return undefined
  return anchorsOf(relative(ROOT, resolved)).has(anchor)
    ? undefined
    : `no heading #${anchor} in ${relative(ROOT, resolved)}`
}

/** Paths outside the repository, spelled so that this file does not name them itself. */
const OUTSIDE = [
  ["..", "shared"].join("/"),
  ["", "work", ""].join("/"),
  ["decisions", "md"].join("."),
  [
    "account-api",
    "md"
  ].join(".")
]

describe("the documents (docs/)", () => {
  it("define every decision that the README, the code and the tests cite, by a heading # D<n>", () => {
    const cited = citations()
    const defined = definitions()
    // The scan found what it looks for: the fifteen decisions the code is built on are all cited.
    expect([...cited.keys()].filter((number) => number <= 15).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 15 }, (_, index) => index + 1)
    )
    const undefinedCitations = [...cited].filter(([number]) => !defined.has(number)).map(([number, places]) =>
      `D${number}, cited at ${places.slice(0, 3).join(", ")}`
    )
    expect(undefinedCitations).toEqual([])
  })

  it("number the contract's sections as the specification did, so that every \"seed §N\" the code cites is there", () => {
    const cited = sectionCitations()
    const sections = contractSections()
    expect(cited.size).toBeGreaterThan(0)
    expect([...sections]).toEqual(expect.arrayContaining(["2.5", "4.10", "9"]))
    const missing = [...cited].filter(([section]) => !sections.has(section)).map(([section, places]) =>
      `§${section}, cited at ${places.slice(0, 3).join(", ")}`
    )
    expect(missing).toEqual([])
  })

  it("name each decision file after its number, with one heading # D<n> Title matching it", () => {
    const decisions = DOCS.filter((file) => file.startsWith(join("docs", "decisions")))
    expect(decisions.length).toBeGreaterThanOrEqual(15)
    const mismatched = decisions.flatMap((file) => {
      const named = /^D([1-9][0-9]?)-[a-z0-9-]+\.md$/.exec(file.split(sep).at(-1) ?? "")
      const heading = /^# D([0-9]{1,2}) \S.*$/m.exec(textOf(file) ?? "")
      return named !== null && heading !== null && Number(named[1]) === Number(heading[1])
        ? []
        : [`${file}: named ${named?.[1] ?? "without D<n>-slug.md"}, heading ${heading?.[0] ?? "missing"}`]
    })
    expect(mismatched).toEqual([])
    const numbers = decisions.map((file) => Number(/D([0-9]{1,2})-/.exec(file)?.[1]))
    expect(new Set(numbers).size).toBe(numbers.length)
  })

  it("link only to files and headings that exist, in the README and under docs/", () => {
    const links = MARKDOWN.flatMap(relativeLinks)
    // The README and the index both link to the decisions.
    expect(links.filter((link) => link.file === "README.md" && link.target.includes("docs/decisions/")).length)
      .toBeGreaterThan(0)
    expect(links.filter((link) => link.file === join("docs", "README.md")).length).toBeGreaterThanOrEqual(18)
    const broken = links.flatMap((link) => {
      const why = brokenLink(link.file, link.target)
      return why === undefined ? [] : [`${link.file}:${link.line} → ${link.target}: ${why}`]
    })
    expect(broken).toEqual([])
  })

  it("name no path outside the repository, anywhere in it", () => {
    const files = filesUnder("")
    expect(files).toContain("README.md")
    expect(files).toContain(join("test", "Docs.test.ts"))
    const offending = files.flatMap((file) => {
      const text = textOf(file)
      if (text === undefined) return []
      return OUTSIDE.filter((path) => text.includes(path)).map((path) => `${file} names ${path}`)
    })
    expect(offending).toEqual([])
  })
})
