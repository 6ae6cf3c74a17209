/**
 * `@account-api/client/settlement`: the settlement producer (D8) for session runners, the one
 * entry that needs `bullmq` and `ioredis` (the package's optional peers: install them beside it).
 * `SettlementClient` with promises (`runSession`), `SettlementProducer` as an Effect service,
 * and the queue's contract: its name, job options, payloads, results and `jobIdOf`, with the
 * rules of a session's labels and a spend's model (D19).
 */
export { LABEL_KEY, Labels, MAX_LABEL_VALUE, MAX_LABELS, MAX_MODEL, Model } from "../../../src/Domain/Labels.js"
export * from "../../../src/Settlement/Jobs.js"
export { SettlementEnqueueError, SettlementJobIdTaken } from "../../../src/Settlement/ProducerErrors.js"
export {
  type Enqueued,
  type Producer,
  type RunSessionOptions,
  type Session,
  SessionCapReached,
  SessionRefused,
  SettlementClient,
  type SettlementError,
  type SettlementOptions,
  SettlementProducer,
  type SpendOptions
} from "./SettlementClient.js"
