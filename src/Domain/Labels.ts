import { Schema } from "effect"
import { textProblem } from "./Text.js"

/**
 * Labels and models (D19, docs/decisions/D19-fleet-controls.md): what a session is tagged with
 * (set by its first reserve) and which model a spend paid for. One home for their rules: the
 * queue's payloads, the limits' `label` scope and the spend report's `label:<key>` all check
 * them here.
 */

/** The most labels a session carries. */
export const MAX_LABELS = 10
/** A label key: lower case, starting with a letter, at most 40 characters. */
export const LABEL_KEY = /^[a-z][a-z0-9_.-]{0,39}$/
/** The longest label value and model name. */
export const MAX_LABEL_VALUE = 100
export const MAX_MODEL = 100

/** Any C0 or C1 control character (tabs and newlines included), by Unicode's general category. */
const CONTROL = /\p{Cc}/u
/**
 * What prints as nothing or reorders what prints, by general category (D19): format characters
 * (Cf: the bidi overrides such as U+202E, zero-width spaces and joiners, U+FEFF), the line and
 * paragraph separators (Zl, Zp: U+2028, U+2029), private use (Co) and unassigned code points (Cn).
 * A label or model holding one reads as another in the console, a report or a CSV.
 */
const INVISIBLE = /[\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u
/** Nothing but white space: a value that shows as blank. */
const BLANK = /^\s*$/u

/** The first invisible character of a value, as U+XXXX, or undefined. */
const invisibleIn = (value: string): string | undefined => {
  const found = INVISIBLE.exec(value)?.[0]
  return found === undefined
    ? undefined
    : `U+${(found.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`
}

/** Why a label key is not one, or undefined. */
export const labelKeyProblem = (key: string): string | undefined =>
  LABEL_KEY.test(key)
    ? undefined
    : "must be 1 to 40 characters of a-z, 0-9, '_', '.' and '-', starting with a lower-case letter"

/** Why a label value (or a model name) is not one, or undefined. */
export const labelValueProblem = (value: string, max = MAX_LABEL_VALUE): string | undefined => {
  if (value.length < 1 || value.length > max) return `must be 1 to ${max} characters`
  if (CONTROL.test(value)) return "must not contain control characters"
  const textual = textProblem(value)
  if (textual !== undefined) return textual
  const invisible = invisibleIn(value)
  if (invisible !== undefined) {
    return `must not contain format, separator, private-use or unassigned characters (${invisible})`
  }
  if (BLANK.test(value)) return "must not be white space only"
  return undefined
}

/** A session's labels: at most ten keys to short printable values. */
export const Labels = Schema.Record({ key: Schema.String, value: Schema.String }).pipe(
  Schema.filter((labels) => {
    const keys = Object.keys(labels)
    if (keys.length > MAX_LABELS) return `labels must have at most ${MAX_LABELS} keys, not ${keys.length}`
    for (const key of keys) {
      const keyProblem = labelKeyProblem(key)
      if (keyProblem !== undefined) return `labels key ${JSON.stringify(key)} ${keyProblem}`
      const valueProblem = labelValueProblem(labels[key] ?? "")
      if (valueProblem !== undefined) return `labels.${key} ${valueProblem}`
    }
    return true
  })
).annotations({
  identifier: "Labels",
  description: `At most ${MAX_LABELS} keys (${LABEL_KEY.source}) to values of 1 to ${MAX_LABEL_VALUE} characters ` +
    "without control, format (bidi, zero-width), separator, private-use or unassigned characters, " +
    "not all white space."
})
export type Labels = typeof Labels.Type

/** The model a spend paid for: 1 to 100 printable characters, not all white space (a label value's rules). */
export const Model = Schema.String.pipe(
  Schema.filter((model) => {
    const problem = labelValueProblem(model, MAX_MODEL)
    return problem === undefined ? true : `model ${problem}`
  })
).annotations({ identifier: "Model", description: `1 to ${MAX_MODEL} printable characters, not all white space.` })

/** A label as a limit's `scope_id` names it, `key=value`: its key and value (the value may hold `=`). */
const splitLabelScopeId = (scopeId: string): { readonly key: string; readonly value: string } | undefined => {
  const at = scopeId.indexOf("=")
  return at < 0 ? undefined : { key: scopeId.slice(0, at), value: scopeId.slice(at + 1) }
}

/** Why a label limit's `scope_id` is not `key=value` of a valid key and value, or undefined. */
export const labelScopeIdProblem = (scopeId: string): string | undefined => {
  const label = splitLabelScopeId(scopeId)
  if (label === undefined) return "must be the label as key=value for a label limit"
  const keyProblem = labelKeyProblem(label.key)
  if (keyProblem !== undefined) return `must be key=value, and the key ${keyProblem}`
  const valueProblem = labelValueProblem(label.value)
  return valueProblem === undefined ? undefined : `must be key=value, and the value ${valueProblem}`
}

/** Whether a session's labels carry the label a scope id names. */
export const carriesLabel = (labels: Readonly<Record<string, string>>, scopeId: string): boolean => {
  const label = splitLabelScopeId(scopeId)
  return label !== undefined && labels[label.key] === label.value
}

/** Two label sets are the same when they name the same keys with the same values, in any order. */
export const sameLabels = (a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean => {
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((key) => b[key] === a[key])
}

/** Labels as stored: keys in order (so equal sets are equal JSON), null when none. */
export const storedLabels = (labels: Readonly<Record<string, string>>): Record<string, string> | null => {
  const keys = Object.keys(labels).sort()
  return keys.length === 0 ? null : Object.fromEntries(keys.map((key) => [key, labels[key] ?? ""]))
}

/**
 * Labels as a `jsonb` column holds them (D19): null when none, so most rows carry nothing. Read
 * as `{}` then, and always with their keys in order, so a client sees one order whichever read
 * it came by (PostgreSQL keeps a `jsonb` object's keys shortest first).
 */
export const LabelsColumn = Schema.transform(
  Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  Schema.Record({ key: Schema.String, value: Schema.String }),
  {
    strict: true,
    decode: (stored) => shownLabels(stored ?? {}),
    encode: (labels) => storedLabels(labels)
  }
)

/** Labels as clients read them: keys in order, `{}` when none. */
export const shownLabels = (labels: Readonly<Record<string, string>>): Record<string, string> =>
  storedLabels(labels) ?? {}
