import { createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import { isIP } from "node:net"

/**
 * The webhook rules that need Node (D17): secrets, signatures and which addresses a delivery may
 * reach. Apart from `Domain/Webhooks.ts`, which the contract (and so the client package, in
 * browsers too) loads.
 */

/** A new secret: `whsec_` and base64 of 32 random bytes (D17). */
export const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`

/** Secrets' keys, made once: a key made from bytes at every signature costs more than the HMAC. */
const keys = new Map<string, KeyObject>()
/** Past this many secrets the cache starts again (ten endpoints an account: thousands of accounts' worth). */
const KEYS_CACHED = 10_000

/** The key a secret signs with: the bytes of the base64 after `whsec_`. */
const keyOf = (secret: string): KeyObject => {
  const cached = keys.get(secret)
  if (cached !== undefined) return cached
  if (keys.size >= KEYS_CACHED) keys.clear()
  const key = createSecretKey(Buffer.from(secret.replace(/^whsec_/, ""), "base64"))
  keys.set(secret, key)
  return key
}

/**
 * `webhook-signature`: `v1,` and base64 HMAC-SHA256 over `{id}.{timestamp}.{body}`, one per
 * secret, space-separated (two during a rotation).
 */
export const signature = (
  secrets: ReadonlyArray<string>,
  message: { readonly id: string; readonly timestamp: number; readonly body: string }
) =>
  secrets.map((secret) =>
    `v1,${
      createHmac("sha256", keyOf(secret)).update(`${message.id}.${message.timestamp}.${message.body}`).digest(
        "base64"
      )
    }`
  ).join(" ")

const ipv4Parts = (address: string) => address.split(".").map(Number)

/**
 * Whether an address is one a webhook may not reach outside development (D17): loopback,
 * private, link-local, unspecified, carrier-grade NAT, or an IPv4 one mapped into IPv6.
 */
export const isInternalAddress = (address: string): boolean => {
  const version = isIP(address)
  if (version === 4) {
    const [a = 0, b = 0] = ipv4Parts(address)
    return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127) || a >= 224
  }
  if (version === 6) {
    const lower = address.toLowerCase()
    const mapped = lower.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/)
    if (mapped?.[1] !== undefined) return isInternalAddress(mapped[1])
    return lower === "::" || lower === "::1" || /^f[cd]/.test(lower) || /^fe[89ab]/.test(lower) || /^ff/.test(lower)
  }
  return true
}

/** Why a URL cannot be an endpoint's, or undefined when it can (its address is checked again at each delivery). */
export const urlProblem = (text: string, allowInsecure: boolean): string | undefined => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "must be an absolute URL"
  }
  if (url.protocol !== "https:" && !(allowInsecure && url.protocol === "http:")) {
    return allowInsecure ? "must be an http or https URL" : "must be an https URL"
  }
  if (url.username !== "" || url.password !== "") return "must not hold a user name or password"
  const host = url.hostname.replace(/^\[|\]$/g, "")
  if (
    !allowInsecure &&
    (host === "localhost" || host.endsWith(".localhost") || (isIP(host) !== 0 && isInternalAddress(host)))
  ) {
    return "must not name a loopback, private or link-local address"
  }
  return undefined
}
