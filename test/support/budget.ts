/**
 * A request budget no test reaches (D15), for the tests that are not about it: many ask one token
 * hundreds of times a second. test/RequestBudget.test.ts holds the budget itself.
 */
export const UNBUDGETED: Readonly<Record<string, string>> = {
  USER_REQUESTS_PER_SECOND: "1000000",
  USER_REQUEST_BURST: "1000000"
}
