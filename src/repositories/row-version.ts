// The version of a row, for a write decided from its read and made only if the row is still as
// read (src/idempotency/store.ts, inOneStatement): PostgreSQL's xmin, the id of the transaction
// that wrote this version of the row. Every UPDATE writes a new version of the row with its own
// transaction's id (freezing keeps the value), so an equal xmin is the row as it was read; no
// column of the schema holds it. Read it as `version`, and compare the row's with the one read.

/** SQL text of the row version of `table` (its name, or its alias in the statement), as text. */
export const rowVersion = (table: string): string => `${table}.xmin::text`
