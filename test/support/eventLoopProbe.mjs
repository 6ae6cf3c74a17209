// Loaded into a service process by the fault tests (`NODE_OPTIONS=--import <this file>`): measures
// how late the process's event loop runs its timers (BullMQ's lock renewal is one of them), in
// windows of 250 ms, and writes them to `event-loop-<pid>.json` in the temporary directory after
// each window, so a killed process leaves its figures behind. Nothing of the service reads it.
import { writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"

const file = path.join(tmpdir(), `event-loop-${process.pid}.json`)
const RESOLUTION_MS = 10
const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
histogram.enable()
/** The histogram counts the whole interval between its timer's runs: the delay is what exceeds the resolution. */
const delayMs = (ns) => Math.max(0, Math.round(ns / 1e4) / 100 - RESOLUTION_MS)
const windows = []
const close = () => {
  if (histogram.count > 0) {
    windows.push({ at: Date.now(), max_ms: delayMs(histogram.max), p99_ms: delayMs(histogram.percentile(99)) })
  }
  histogram.reset()
  writeFileSync(file, JSON.stringify(windows))
}
setInterval(close, 250).unref()
process.once("exit", close)
