import { readFileSync } from "node:fs"
import { parseArgs } from "node:util"

/**
 * Where a V8 CPU profile (`npm run bench -- --cpu-prof`, in bench/results/)
 * spends its time: self time by function, by file and by package, and
 * inclusive time for the functions whose location matches --match.
 *
 *   tsx bench/profile.ts bench/results/CPU.….cpuprofile [--top 30] [--match /src/] [--callers TEXT]
 *
 * --callers shows the stacks (innermost fourteen frames, enough to reach the library that asked) spending self time in functions whose
 * name or location contains TEXT.
 */

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
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

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { top: { type: "string", default: "30" }, match: { type: "string" }, callers: { type: "string" } }
})
const file = positionals[0]
if (file === undefined) throw new Error("usage: profile.ts <file.cpuprofile> [--top N] [--match TEXT]")
const top = Number(values.top)
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile

const shortPath = (url: string): string => {
  const path = url.replace(/^file:\/\//, "")
  const modules = path.lastIndexOf("/node_modules/")
  if (modules >= 0) return path.slice(modules + "/node_modules/".length)
  const source = path.search(/\/(src|bench|migrations)\//)
  return source >= 0 ? path.slice(source + 1) : path
}
const packageOf = (url: string): string => {
  if (url === "") return "(native or V8)"
  const path = shortPath(url)
  if (path.startsWith("node:") || !path.includes("/")) return `node:${path.replace(/^node:/, "").split("/")[0]}`
  const parts = path.split("/")
  return path.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0] ?? path
}
const functionKey = (frame: CallFrame): string =>
  frame.url === ""
    ? frame.functionName || "(anonymous)"
    : `${frame.functionName || "(anonymous)"}  ${shortPath(frame.url)}:${frame.lineNumber + 1}`

// Each sample's time is the delta to the next sample (the last one gets none).
const selfByNode = new Map<number, number>()
profile.samples.forEach((id, index) => {
  const delta = profile.timeDeltas[index + 1] ?? 0
  selfByNode.set(id, (selfByNode.get(id) ?? 0) + delta)
})

const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
const idle = new Set(
  ["(idle)", "(program)"].flatMap((name) =>
    profile.nodes.filter((node) => node.callFrame.functionName === name).map((node) => node.id)
  )
)
let busy = 0
for (const [id, time] of selfByNode) if (!idle.has(id)) busy += time

const add = (map: Map<string, number>, key: string, time: number) => map.set(key, (map.get(key) ?? 0) + time)
const byFunction = new Map<string, number>()
const byFile = new Map<string, number>()
const byPackage = new Map<string, number>()
for (const [id, time] of selfByNode) {
  const node = nodes.get(id)
  if (node === undefined || idle.has(id)) continue
  add(byFunction, functionKey(node.callFrame), time)
  add(byFile, node.callFrame.url === "" ? node.callFrame.functionName : shortPath(node.callFrame.url), time)
  add(byPackage, packageOf(node.callFrame.url), time)
}

// Inclusive: a node's self time counts once for every distinct matching function on its stack.
const inclusive = new Map<string, number>()
const match = values.match
if (match !== undefined) {
  const root = profile.nodes[0]
  const walk = (id: number, onStack: ReadonlyArray<string>) => {
    const node = nodes.get(id)
    if (node === undefined) return
    const key = functionKey(node.callFrame)
    const stack = node.callFrame.url.includes(match) && !onStack.includes(key) ? [...onStack, key] : onStack
    const time = idle.has(id) ? 0 : selfByNode.get(id) ?? 0
    for (const entry of stack) add(inclusive, entry, time)
    for (const child of node.children ?? []) walk(child, stack)
  }
  if (root !== undefined) walk(root.id, [])
}

// Callers: each node's self time, keyed by its innermost stack frames, for functions named --callers.
const callers = new Map<string, number>()
const callersOf = values.callers
if (callersOf !== undefined) {
  const parents = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id)
  for (const [id, time] of selfByNode) {
    const node = nodes.get(id)
    if (node === undefined || !functionKey(node.callFrame).includes(callersOf)) continue
    const frames: Array<string> = []
    for (let at: number | undefined = id; at !== undefined && frames.length < 14; at = parents.get(at)) {
      const frame = nodes.get(at)?.callFrame
      if (frame !== undefined) frames.push(functionKey(frame))
    }
    add(callers, frames.join("\n           <- "), time)
  }
}

const print = (title: string, map: Map<string, number>, count: number) => {
  process.stdout.write(`\n${title}\n`)
  for (const [key, time] of [...map].sort((a, b) => b[1] - a[1]).slice(0, count)) {
    process.stdout.write(
      `${(time / 1000).toFixed(0).padStart(8)} ms ${((100 * time) / busy).toFixed(1).padStart(5)}%  ${key}\n`
    )
  }
}

process.stdout.write(`busy ${(busy / 1000).toFixed(0)} ms (idle and "(program)" left out)\n`)
print("self time by package", byPackage, 12)
print("self time by file", byFile, 20)
print(`self time by function (top ${top})`, byFunction, top)
if (callersOf !== undefined) print(`stacks ending in ${callersOf}`, callers, 10)
if (match !== undefined) print(`inclusive time of functions in files matching "${match}"`, inclusive, top)
