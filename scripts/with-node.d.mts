// Types for what tests import from with-node.mjs, which stays JavaScript so that set-up runs it before anything is installed.

/** The tested Node lines (major) and the version of each that is installed and tested. */
export declare const TESTED_NODE: Readonly<Record<string, string>>

/** `.data/node/<major>`, holding `bin/node`. */
export declare const nodeHome: (major: string | number) => string
