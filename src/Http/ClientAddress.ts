import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Option } from "effect"
import { BlockList, isIP } from "node:net"

/**
 * The client's address as sign-in counts it (D2, issue 22.4). Behind a proxy every client
 * arrives from the proxy's address; `X-Forwarded-For` says who the proxy served, but anyone can
 * send that header, so it is believed only when the peer is a listed proxy (`TRUSTED_PROXIES`).
 * Then the hops are read from the right, past every listed proxy, to the first one that is not:
 * that is the client (what hops further left say was written by the client itself).
 */

/** IPv4 as IPv4 even when the socket reports it mapped into IPv6 (`::ffff:10.0.0.1`). */
const plain = (address: string) => {
  const trimmed = address.trim()
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(trimmed)
  return mapped?.[1] ?? trimmed
}

/** `TRUSTED_PROXIES` entries (addresses or CIDRs) as a list `node:net` checks; an entry it cannot read is refused. */
export const trustedProxiesOf = (entries: ReadonlyArray<string>): BlockList => {
  const list = new BlockList()
  for (const entry of entries) {
    const [address = "", prefix] = entry.split("/")
    const family = isIP(plain(address))
    if (family === 0) throw new Error(`TRUSTED_PROXIES: ${entry} is not an IP address or CIDR`)
    const type = family === 4 ? "ipv4" : "ipv6"
    if (prefix === undefined) list.addAddress(plain(address), type)
    else {
      const bits = Number(prefix)
      if (!Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128)) {
        throw new Error(`TRUSTED_PROXIES: ${entry} has no valid prefix length`)
      }
      list.addSubnet(plain(address), bits, type)
    }
  }
  return list
}

const isListed = (proxies: BlockList, address: string) => {
  const family = isIP(address)
  return family !== 0 && proxies.check(address, family === 4 ? "ipv4" : "ipv6")
}

/** The client address of a request: the peer, or the right-most unlisted `X-Forwarded-For` hop when the peer is a listed proxy. */
export const clientAddress = (request: HttpServerRequest.HttpServerRequest, proxies: BlockList): string => {
  const peer = plain(Option.getOrElse(request.remoteAddress, () => "unknown"))
  if (!isListed(proxies, peer)) return peer
  const hops = (request.headers["x-forwarded-for"] ?? "").split(",").map(plain).filter((hop) => hop !== "")
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i] ?? ""
    // A hop that is no address at all ends the trust: the proxy passed on something it did not write.
    if (isIP(hop) === 0) return peer
    if (!isListed(proxies, hop)) return hop
  }
  return hops[0] ?? peer
}
