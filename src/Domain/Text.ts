/**
 * Strings from outside (request bodies, queue payloads) that PostgreSQL could
 * not store or that are not text at all: NUL (a `text` column refuses it,
 * SQLSTATE 22021) and lone UTF-16 surrogates (not Unicode; they become U+FFFD
 * or an error on the way to UTF-8). Refused where they enter, field by field,
 * so they never reach the database or fail a neighbour's work.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why a string is not storable text, in words a client can act on; `undefined` when it is. */
export const textProblem = (s: string): string | undefined => {
  if (s.includes("\u0000")) return "must not contain the NUL character (U+0000)"
  if (LONE_SURROGATE.test(s)) return "must be valid Unicode (no lone surrogates)"
  return undefined
}
