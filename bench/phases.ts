import { readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { fileURLToPath } from "node:url"

/**
 * Where the settlement worker's CPU goes, by phase of a job's life: a V8 CPU profile of the
 * worker (`npm run bench -- --only settlement --cpu-prof`, the file of the worker's pid) with
 * each sample put in one phase by its stack. Frames of the bundle are mapped to their source
 * files through its source map, so the phases follow `src/`, not the bundle's line numbers.
 *
 *   tsx bench/phases.ts bench/results/CPU.….cpuprofile
 *
 * A sample belongs to the webhook relay and delivery if any frame of its stack is theirs (they
 * share the worker's cores); otherwise to the first phase in the list below that any frame of its
 * stack names (the service's own phases before the libraries they call).
 */

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}

interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const file = process.argv[2]
if (file === undefined) throw new Error("usage: phases.ts <worker.cpuprofile>")
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile

const maps = new Map<string, SourceMap | undefined>()
const sourceMapOf = (url: string): SourceMap | undefined => {
  if (!maps.has(url)) {
    try {
      maps.set(url, new SourceMap(JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, "utf8"))))
    } catch {
      maps.set(url, undefined)
    }
  }
  return maps.get(url)
}

/** A frame's source: the original file for bundled code, the URL otherwise. */
const sourceOf = (frame: CallFrame): string => {
  if (!frame.url.startsWith("file://") || !frame.url.includes("/dist/")) return frame.url
  const entry = sourceMapOf(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber)
  return entry !== undefined && "originalSource" in entry ? entry.originalSource : frame.url
}

/** The phases owned by a whole subtree: whatever runs under them is theirs. */
const owners: ReadonlyArray<readonly [string, (source: string, name: string) => boolean]> = [
  [
    "webhooks: relay and delivery",
    (source) => /\/src\/Webhooks|node:_http_client|node:https|node:_http_agent/.test(source)
  ],
  ["metrics and logs", (source) => /\/src\/(Settlement\/MetricsListener|Metrics|Logging)\.ts/.test(source)]
]

/** The phases a frame names, in their order of precedence. */
const activities: ReadonlyArray<readonly [string, (source: string, name: string) => boolean]> = [
  ["garbage collection", (_, name) => name === "(garbage collector)"],
  ["decode (payloads)", (source, name) => /\/src\/Settlement\/Worker\.ts/.test(source) && name === "decodeJob"],
  ["plan (rules)", (source) => /\/src\/Settlement\/Plan\.ts|\/src\/Domain\/(Movement|SpendLimit)\.ts/.test(source)],
  [
    "events (build and encode)",
    (source) => /\/src\/(Events\.ts|Settlement\/Notices\.ts|Domain\/Events\.ts)/.test(source)
  ],
  ["results (encode for BullMQ)", (source, name) => /\/src\/Domain\/Wallet\.ts/.test(source) || name === "resultOf"],
  [
    "postgres: results (parse, decode)",
    (source) => /pg\/lib\/result|pg-types|postgres-|pg-protocol\/dist\/parser/.test(source)
  ],
  [
    "postgres: statements (build, encode, send)",
    (source) => /\/(pg|pg-protocol|pg-pool|@effect\/sql|@effect\/sql-pg)\//.test(source)
  ],
  [
    "ledger and batch state (staging, decoding rows)",
    (source) =>
      /\/src\/(Wallets\/Ledger|Wallets\/Repo|Settlement\/Repo|Settlement\/LimitsRepo|Settlement\/SessionsRepo|Sql\/)/
        .test(source)
  ],
  ["BullMQ and Redis", (source) => /\/(bullmq|ioredis|msgpackr|cluster-key-slot|redis-errors)\//.test(source)],
  [
    "settlement batch (batcher, service)",
    (source) => /\/src\/Settlement(\.ts|\/Batcher\.ts|\/Worker\.ts)/.test(source)
  ],
  ["decimals (decimal.js)", (source) => /decimal\.js/.test(source)],
  ["Effect runtime", (source) => /\/effect\/|\/node_modules\/effect/.test(source)]
]

const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
const phaseOf = new Map<number, string>()
const idle = new Set(["(idle)", "(program)"])
const OTHER = "other (node, V8, I/O syscalls)"
const walk = (id: number, owner: string | undefined, rank: number) => {
  const node = nodes.get(id)
  if (node === undefined) return
  const source = sourceOf(node.callFrame)
  const name = node.callFrame.functionName
  const ownerHere = owner ?? owners.find(([, test]) => test(source, name))?.[0]
  const found = activities.findIndex(([, test]) => test(source, name))
  const rankHere = found >= 0 && found < rank ? found : rank
  phaseOf.set(id, idle.has(name) ? "idle" : ownerHere ?? activities[rankHere]?.[0] ?? OTHER)
  for (const child of node.children ?? []) walk(child, ownerHere, rankHere)
}
const root = profile.nodes[0]
if (root !== undefined) walk(root.id, undefined, activities.length)

const byPhase = new Map<string, number>()
profile.samples.forEach((id, index) => {
  const phase = phaseOf.get(id) ?? OTHER
  byPhase.set(phase, (byPhase.get(phase) ?? 0) + (profile.timeDeltas[index + 1] ?? 0))
})
byPhase.delete("idle")
const busy = [...byPhase.values()].reduce((a, b) => a + b, 0)
process.stdout.write(`busy ${(busy / 1000).toFixed(0)} ms\n\n| phase | ms | share |\n|---|---:|---:|\n`)
for (const [phase, time] of [...byPhase].sort((a, b) => b[1] - a[1])) {
  process.stdout.write(`| ${phase} | ${(time / 1000).toFixed(0)} | ${((100 * time) / busy).toFixed(1)}% |\n`)
}
