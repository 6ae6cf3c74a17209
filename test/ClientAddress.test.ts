import { describe, expect, it } from "@effect/vitest"
import { clientAddressOf, type Listing } from "../src/Domain/ClientAddress.js"

/** 10.0.0.0/8 listed; a text of anything but digits, dots, colons and hex letters is no address. */
const listing = (address: string): Listing =>
  !/^[0-9a-f.:]+$/i.test(address) ? "not an address" : address.startsWith("10.") ? "listed" : "unlisted"

describe("the client address sign-in counts (D2, issue 22.4)", () => {
  it("is the peer when the peer is not a listed proxy, whatever X-Forwarded-For says", () => {
    expect(clientAddressOf("203.0.113.9", "198.51.100.1", listing)).toBe("203.0.113.9")
    expect(clientAddressOf("::ffff:203.0.113.9", undefined, listing)).toBe("203.0.113.9")
  })

  it("behind listed proxies, is the right-most hop that is not one", () => {
    expect(clientAddressOf("10.0.0.1", "198.51.100.7, 203.0.113.9, 10.0.0.2", listing)).toBe("203.0.113.9")
    expect(clientAddressOf("::ffff:10.0.0.1", "::ffff:203.0.113.9", listing)).toBe("203.0.113.9")
  })

  it("is the left-most hop when every hop is a listed proxy, and the peer when there is none", () => {
    expect(clientAddressOf("10.0.0.1", "10.0.0.3, 10.0.0.2", listing)).toBe("10.0.0.3")
    expect(clientAddressOf("10.0.0.1", undefined, listing)).toBe("10.0.0.1")
    expect(clientAddressOf("10.0.0.1", " , ", listing)).toBe("10.0.0.1")
  })

  it("stops trusting at a hop that is no address: the peer is counted", () => {
    expect(clientAddressOf("10.0.0.1", "203.0.113.9, not-an-address, 10.0.0.2", listing)).toBe("10.0.0.1")
  })
})
