import { Duration } from "effect"
import type { ServerResponse } from "node:http"

/** Looks at a response this many times per stall period. */
const LOOKS_PER_PERIOD = 4

/**
 * Cuts `response` off (its socket destroyed, so its place and fiber are freed) once its reader
 * has taken nothing for `period`: bytes have waited in the response, unsent, at every look over a
 * whole period with no `drain` between. Progress is what the socket took, not what the server
 * produced: a stream whose chunks come from elsewhere (an account's shared reader) would
 * otherwise look alive while its reader sleeps. What the kernel's buffers hold counts as taken
 * (Node cannot see past them), so a reader that stopped is noticed once those are full.
 */
export const cutWhenStalled = (response: ServerResponse, period: Duration.DurationInput) => {
  let waitingLooks = 0
  const look = setInterval(() => {
    if (response.writableLength === 0) waitingLooks = 0
    else if (++waitingLooks > LOOKS_PER_PERIOD) response.destroy()
  }, Duration.toMillis(period) / LOOKS_PER_PERIOD)
  const drained = () => {
    waitingLooks = 0
  }
  response.on("drain", drained)
  response.once("close", () => {
    clearInterval(look)
    response.off("drain", drained)
  })
}
