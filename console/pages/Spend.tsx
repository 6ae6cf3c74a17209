/** Spend: filled in next. */
export const Spend = () => <h1>Spend</h1>
