/**
 * `@account-api/client`: the Account API for any TypeScript or JavaScript codebase, with
 * promises. `AccountApiClient` speaks HTTP (the pull and the live stream of events among it);
 * `verifyWebhook` checks a delivery. It is the web entry's list, for Node as for browsers; the
 * settlement producer, which needs BullMQ, is `@account-api/client/settlement`, and the Effect
 * flavour of the contract `@account-api/client/effect`.
 */
export * from "./web.js"
