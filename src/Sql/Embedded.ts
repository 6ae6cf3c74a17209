import type { Statement } from "@effect/sql"
import { Effect, Schema } from "effect"

/**
 * A read that another repository's statement carries, so that a caller needing several reads
 * at one moment pays one round trip: a SELECT, whose rows that statement aggregates as one JSON
 * array, and how that array decodes. Its columns must survive JSON: amounts selected as text.
 */
export interface EmbeddedRead<A> {
  readonly select: Statement.Fragment
  readonly decode: (rows: unknown) => Effect.Effect<A>
}

/** An embedded read of rows of `schema`, handed to `finish`; a row that does not decode is the repository's defect. */
export const embeddedRead = <Row, I, B>(
  select: Statement.Fragment,
  schema: Schema.Schema<Row, I>,
  finish: (rows: ReadonlyArray<Row>) => B
): EmbeddedRead<B> => {
  const decode = Schema.decodeUnknown(Schema.Array(schema))
  return { select, decode: (rows) => Effect.map(Effect.orDie(decode(rows)), finish) }
}
