import { Schema } from "effect"

/** Versions are stored as 32-bit integers: a larger one cannot be current, and no client ever read one. */
export const MAX_VERSION = 2_147_483_647

/** The version a client last read, for a write that must not overwrite another's (D5, D6). */
export const ExpectedVersion = Schema.Int.pipe(Schema.between(0, MAX_VERSION)).annotations({
  message: () => ({ message: `must be an integer from 0 to ${MAX_VERSION}`, override: true }),
  description: "The version last read; omit it when nothing is saved yet (version 0)."
})
