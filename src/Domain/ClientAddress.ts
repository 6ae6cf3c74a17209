/**
 * The client's address as sign-in counts it (D2, issue 22.4). Behind a proxy every client
 * arrives from the proxy's address; `X-Forwarded-For` says who the proxy served, but anyone can
 * send that header, so it is believed only when the peer is a listed proxy (`TRUSTED_PROXIES`).
 * Then the hops are read from the right, past every listed proxy, to the first one that is not:
 * that is the client (what hops further left say was written by the client itself).
 */

/** IPv4 as IPv4 even when the socket reports it mapped into IPv6 (`::ffff:10.0.0.1`). */
export const unmapped = (address: string) => {
  const trimmed = address.trim()
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(trimmed)
  return mapped?.[1] ?? trimmed
}

/** What the proxy list makes of a text: a listed proxy's address, another address, or no address at all. */
export type Listing = "listed" | "unlisted" | "not an address"

/**
 * The client address of a request from `peer` that carries `forwardedFor` (its `X-Forwarded-For`):
 * the peer, or the right-most unlisted hop when the peer is a listed proxy.
 */
export const clientAddressOf = (
  peer: string,
  forwardedFor: string | undefined,
  listingOf: (address: string) => Listing
): string => {
  const from = unmapped(peer)
  if (listingOf(from) !== "listed") return from
  const hops = (forwardedFor ?? "").split(",").map(unmapped).filter((hop) => hop !== "")
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i] ?? ""
    const listing = listingOf(hop)
    // A hop that is no address at all ends the trust: the proxy passed on something it did not write.
    if (listing === "not an address") return from
    if (listing === "unlisted") return hop
  }
  return hops[0] ?? from
}
