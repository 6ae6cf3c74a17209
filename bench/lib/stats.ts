/** A figure over several rounds: the median is what we report, min and max show the spread. */
export interface Stat {
  readonly median: number
  readonly min: number
  readonly max: number
}

export const summarise = (values: ReadonlyArray<number>): Stat => {
  if (values.length === 0) throw new Error("no values to summarise")
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  const lower = sorted[middle - 1] ?? Number.NaN
  const upper = sorted[middle] ?? Number.NaN
  return {
    median: sorted.length % 2 === 0 ? (lower + upper) / 2 : upper,
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN
  }
}

export const round = (value: number, digits: number): number => {
  const factor = 10 ** digits
  return Math.round(value * factor) / factor
}

/** The value below which `fraction` of the samples fall (nearest rank). Sorts in place. */
export const percentile = (samples: Array<number>, fraction: number): number => {
  samples.sort((a, b) => a - b)
  return samples[Math.min(samples.length - 1, Math.max(0, Math.ceil(samples.length * fraction) - 1))] ?? Number.NaN
}
