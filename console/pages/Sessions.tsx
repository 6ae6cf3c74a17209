/** Sessions: filled in next. */
export const Sessions = () => <h1>Sessions</h1>
