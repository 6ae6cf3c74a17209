/**
 * What a JSON Schema of the OpenAPI document says about a value, and values at
 * and just past each of its bounds: pattern quantifiers, lengths, minimum and
 * maximum, enums, required and unknown properties, types. Written from the
 * JSON Schema keywords the document uses, not from the service's code, so a
 * test can hold the service to the document.
 */

export type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

/** Resolves `{"$ref": "#/components/schemas/X"}` against the document. */
export const resolve = (document: Json, schema: unknown): Json => {
  if (!isObject(schema)) return {}
  if (typeof schema.$ref !== "string") return schema
  const name = schema.$ref.split("/").pop() ?? ""
  const components = isObject(document.components) && isObject(document.components.schemas)
    ? document.components.schemas
    : {}
  const { $ref: _, ...beside } = schema
  return { ...resolve(document, components[name]), ...beside }
}

const codePoints = (s: string) => [...s].length

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Whether the document admits `value` for `schema` (the keywords it uses; annotations are ignored). */
export const admits = (document: Json, raw: unknown, value: unknown): boolean => {
  const schema = resolve(document, raw)
  if (Array.isArray(schema.allOf) && !schema.allOf.every((part) => admits(document, part, value))) return false
  if (Array.isArray(schema.anyOf) && !schema.anyOf.some((part) => admits(document, part, value))) return false
  if (Array.isArray(schema.enum) && !schema.enum.some((allowed) => allowed === value)) return false
  switch (schema.type) {
    case "string":
      if (typeof value !== "string") return false
      break
    case "integer":
      if (typeof value !== "number" || !Number.isInteger(value)) return false
      break
    case "number":
      if (typeof value !== "number") return false
      break
    case "boolean":
      if (typeof value !== "boolean") return false
      break
    case "object":
      if (!isObject(value)) return false
      break
  }
  if (typeof value === "string") {
    if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(value)) return false
    if (typeof schema.minLength === "number" && codePoints(value) < schema.minLength) return false
    if (typeof schema.maxLength === "number" && codePoints(value) > schema.maxLength) return false
    if (schema.format === "date-time" && !DATE_TIME.test(value)) return false
    if (schema.format === "uuid" && !UUID.test(value)) return false
  }
  if (typeof value === "number") {
    if (typeof schema.minimum === "number" && value < schema.minimum) return false
    if (typeof schema.maximum === "number" && value > schema.maximum) return false
  }
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {}
    const required = Array.isArray(schema.required) ? schema.required : []
    if (!required.every((name) => typeof name === "string" && name in value)) return false
    for (const [name, field] of Object.entries(value)) {
      if (name in properties) {
        if (!admits(document, properties[name], field)) return false
      } else if (schema.additionalProperties === false) return false
    }
  }
  return true
}

// ---- strings from a pattern -------------------------------------------------

type Atom =
  | { readonly kind: "chars"; readonly low: string; readonly high: string }
  | { readonly kind: "group"; readonly alternatives: ReadonlyArray<ReadonlyArray<Piece>> }
  | { readonly kind: "nothing" }

interface Piece {
  readonly atom: Atom
  readonly min: number
  readonly max: number
  /** Numbers the quantifiers of the whole pattern, in order of appearance. */
  readonly index: number
}

/** The characters a class may stand for, in the order the "low" pick prefers. */
const POOL = ["0", "1", "a", "f", "A", "-", "_", ".", "9", "z", "Z", " ", "@"]

const charsOf = (source: string): Atom => {
  const matcher = new RegExp(`^${source}$`, "u")
  const matching = POOL.filter((char) => matcher.test(char))
  const printable = matching.filter((char) => char.trim() !== "")
  const low = printable[0] ?? matching[0] ?? ""
  const high = printable.includes("9") ? "9" : printable[printable.length - 1] ?? low
  return { kind: "chars", low, high }
}

/** Parses the subset of ECMAScript patterns the document uses: classes, groups, alternation, quantifiers, lookahead. */
const parse = (pattern: string): ReadonlyArray<Piece> => {
  let at = 0
  let index = 0
  const sequence = (): Array<Array<Piece>> => {
    const alternatives: Array<Array<Piece>> = [[]]
    while (at < pattern.length && pattern[at] !== ")") {
      const char = pattern[at] ?? ""
      let atom: Atom
      if (char === "|") {
        at++
        alternatives.push([])
        continue
      } else if (char === "^" || char === "$") {
        at++
        continue
      } else if (char === "(") {
        const lookahead = pattern.startsWith("(?=", at) || pattern.startsWith("(?!", at)
        at += lookahead ? 3 : pattern.startsWith("(?:", at) ? 3 : 1
        const inner = sequence()
        at++ // ")"
        atom = lookahead ? { kind: "nothing" } : { kind: "group", alternatives: inner }
      } else if (char === "[") {
        const start = at
        at++
        if (pattern[at] === "^") at++
        if (pattern[at] === "]") at++
        while (at < pattern.length && pattern[at] !== "]") at += pattern[at] === "\\" ? 2 : 1
        at++
        atom = charsOf(pattern.slice(start, at))
      } else if (char === "\\") {
        atom = charsOf(pattern.slice(at, at + 2))
        at += 2
      } else {
        atom = charsOf(char === "." ? "." : char.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
        at++
      }
      let min = 1
      let max = 1
      const quantifier = /^(?:\{(\d+)(?:(,)(\d*))?\}|[*+?])/.exec(pattern.slice(at))
      if (quantifier !== null) {
        const [text, from, comma, to] = quantifier
        at += text.length
        if (text === "*") [min, max] = [0, Infinity]
        else if (text === "+") [min, max] = [1, Infinity]
        else if (text === "?") [min, max] = [0, 1]
        else {
          min = Number(from)
          max = comma === undefined ? min : to === "" || to === undefined ? Infinity : Number(to)
        }
      }
      alternatives[alternatives.length - 1]?.push({ atom, min, max, index: index++ })
    }
    return alternatives
  }
  const alternatives = sequence()
  return [{ atom: { kind: "group", alternatives }, min: 1, max: 1, index: index++ }]
}

interface Plan {
  readonly counts: ReadonlyMap<number, number>
  readonly pick: "low" | "high"
}

const render = (pieces: ReadonlyArray<Piece>, plan: Plan): string =>
  pieces.map((piece) => {
    const count = plan.counts.get(piece.index) ?? piece.min
    const once = piece.atom.kind === "chars"
      ? piece.atom[plan.pick]
      : piece.atom.kind === "group"
      ? render(piece.atom.alternatives[0] ?? [], plan)
      : ""
    return once.repeat(count)
  }).join("")

const piecesOf = (pieces: ReadonlyArray<Piece>): ReadonlyArray<Piece> =>
  pieces.flatMap((piece) =>
    piece.atom.kind === "group" ? [piece, ...piecesOf(piece.atom.alternatives[0] ?? [])] : [piece]
  )

/**
 * Strings at and just past each bound of a pattern and of the lengths beside
 * it: every quantifier at its least and most and one past each (others at their
 * least), with low and high characters, and the unbounded ones stretched to
 * `maxLength` and one past it.
 */
export const patternCandidates = (pattern: string, maxLength?: number): ReadonlyArray<string> => {
  const root = parse(pattern)
  const all = piecesOf(root)
  const out = new Set<string>()
  const at = (counts: ReadonlyArray<readonly [number, number]>, pick: Plan["pick"] = "low") =>
    out.add(render(root, { counts: new Map(counts), pick }))
  at([])
  at([], "high")
  for (const piece of all) {
    if (piece.min > 0) at([[piece.index, piece.min - 1]])
    if (Number.isFinite(piece.max)) {
      for (const pick of ["low", "high"] as const) {
        at([[piece.index, piece.max]], pick)
        at([[piece.index, piece.max + 1]], pick)
      }
    } else if (maxLength !== undefined) {
      const base = render(root, { counts: new Map(), pick: "low" }).length
      const unit = render(root, { counts: new Map([[piece.index, piece.min + 1]]), pick: "low" }).length - base
      if (unit > 0) {
        const fill = Math.floor((maxLength - base) / unit)
        at([[piece.index, piece.min + fill]])
        at([[piece.index, piece.min + fill + 1]])
      }
    }
  }
  return [...out]
}

// ---- values at and past the bounds of a schema --------------------------------

/** A value to send for one field, with whether the document admits it. */
export interface Candidate {
  readonly value: unknown
  readonly label: string
}

/** A value as a label shows it: long strings by their length. */
const shown = (value: unknown): string =>
  typeof value === "string" && value.length > 40
    ? `${JSON.stringify(value.slice(0, 20))}… (${value.length} characters)`
    : JSON.stringify(value)

const filler = (length: number) => "k".repeat(Math.max(0, length))

/** Values at and just past each bound of a leaf schema (string, number, boolean), plus one of the wrong type. */
export const leafCandidates = (document: Json, raw: unknown): ReadonlyArray<Candidate> => {
  const schema = resolve(document, raw)
  const candidates: Array<Candidate> = []
  const add = (value: unknown, label: string) => candidates.push({ value, label })
  const parts = [schema, ...(Array.isArray(schema.allOf) ? schema.allOf.map((part) => resolve(document, part)) : [])]
  if (Array.isArray(schema.enum)) {
    for (const value of schema.enum) add(value, `enum value ${JSON.stringify(value)}`)
    if (schema.type === "boolean" || schema.enum.every((value) => typeof value === "boolean")) {
      for (const value of [true, false]) add(value, `boolean ${value}`)
    } else {
      for (const value of schema.enum) add(`${String(value)}x`, `just past enum value ${JSON.stringify(value)}`)
    }
  }
  if (schema.type === "string") {
    const maxLength = typeof schema.maxLength === "number" ? schema.maxLength : undefined
    const minLength = typeof schema.minLength === "number" ? schema.minLength : undefined
    for (const part of parts) {
      if (typeof part.pattern === "string") {
        for (const value of patternCandidates(part.pattern, maxLength)) add(value, `pattern ${part.pattern}`)
      }
    }
    const patterned = typeof schema.pattern === "string"
    if (!patterned && maxLength !== undefined) {
      add(filler(maxLength), "maxLength")
      add(filler(maxLength + 1), "maxLength + 1")
    }
    if (!patterned && minLength !== undefined) {
      add(filler(minLength), "minLength")
      if (minLength > 0) add(filler(minLength - 1), "minLength - 1")
    }
    if (schema.format === "date-time") {
      // A time the document says must be after now (a grant's expiry, D21) is sent a year ahead.
      const ahead = typeof schema.description === "string" && schema.description.includes("after now")
      const year = ahead ? new Date().getUTCFullYear() + 1 : 2026
      add(`${year}-01-31T00:00:00Z`, "a date-time")
      add(`${year}-01-31T00:00:00.000+02:00`, "a date-time with an offset")
      add("not a time", "not a date-time")
    }
    if (schema.format === "uuid" && !patterned) {
      add("0190a5d2-0000-7000-8000-000000000000", "a UUID")
      add("0190a5d2-0000-7000-8000-00000000000", "a UUID short of one digit")
    }
    add(1, "a number instead of a string")
  }
  if (schema.type === "integer" || schema.type === "number") {
    for (const [key, step] of [["minimum", -1], ["maximum", 1]] as const) {
      const bound = schema[key]
      if (typeof bound === "number") {
        add(bound, key)
        add(bound + step, `${key} ${step > 0 ? "+" : "-"} 1`)
      }
    }
    if (schema.type === "integer") add(1.5, "a fraction")
    add("1", "a string instead of a number")
  }
  if (schema.type === "boolean" && !Array.isArray(schema.enum)) {
    add(true, "true")
    add(false, "false")
    add("true", "a string instead of a boolean")
  }
  return candidates.filter((candidate, i) =>
    candidates.findIndex((other) => Object.is(other.value, candidate.value)) === i
  )
}

/** One request body: the base with one field changed, removed or added, and the pointer that change concerns. */
export interface BodyVariant {
  readonly body: Json
  readonly pointer: string
  readonly label: string
}

/** Walks an object schema: each property's leaf candidates, each required one left out, one unknown field added. */
export const bodyVariants = (document: Json, raw: unknown, base: Json, prefix = "#"): ReadonlyArray<BodyVariant> => {
  const schema = resolve(document, raw)
  const properties = isObject(schema.properties) ? schema.properties : {}
  const required = Array.isArray(schema.required) ? schema.required : []
  const variants: Array<BodyVariant> = []
  for (const [name, field] of Object.entries(properties)) {
    const pointer = `${prefix}/${name}`
    const resolved = resolve(document, field)
    if (resolved.type === "object") {
      const inner = isObject(base[name]) ? base[name] : {}
      for (const variant of bodyVariants(document, resolved, inner, pointer)) {
        variants.push({ ...variant, body: { ...base, [name]: variant.body } })
      }
    } else {
      for (const { label, value } of leafCandidates(document, resolved)) {
        variants.push({ body: { ...base, [name]: value }, pointer, label: `${pointer} = ${shown(value)} (${label})` })
      }
    }
    if (required.includes(name)) {
      const { [name]: _, ...without } = base
      variants.push({ body: without, pointer, label: `${pointer}: left out` })
    } else if (name in base) {
      const { [name]: _, ...without } = base
      variants.push({ body: without, pointer, label: `${pointer}: optional, left out` })
    }
  }
  if (schema.additionalProperties === false) {
    const pointer = `${prefix}/not_a_field`
    variants.push({ body: { ...base, not_a_field: "x" }, pointer, label: `${pointer}: unknown field` })
  }
  return variants
}
