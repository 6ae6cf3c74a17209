/** Ledger: filled in next. */
export const Ledger = () => <h1>Ledger</h1>
