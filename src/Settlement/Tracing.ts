import { Tracer } from "effect"
import type { Keyed } from "./Batcher.js"
import { type SettlementJob, TRACEPARENT } from "./Jobs.js"

/** The producers' trace contexts of a batch's jobs, as links of the batch's span; malformed ones are left out. */
export const producerLinks = (items: ReadonlyArray<Keyed<SettlementJob>>): Array<Tracer.SpanLink> =>
  items.flatMap(({ item }) => {
    const match = item.payload.traceparent?.match(TRACEPARENT)
    if (match?.[1] === undefined || match[2] === undefined) return []
    return [{
      _tag: "SpanLink" as const,
      span: Tracer.externalSpan({ traceId: match[1], spanId: match[2], sampled: match[3] === "01" }),
      attributes: { "settlement.job.kind": item.kind }
    }]
  })
