// A statement's name and attributes from its text, as OpenTelemetry's database conventions name
// them: the operation and its table (`SELECT users`). The statement spans and
// db_operation_duration_seconds share them. The text is the one postgres.js sent, whose values
// are $n parameters: no parameter value ever reaches a name or an attribute.
export interface StatementDescription {
  name: string
  attributes: Record<string, string>
}

const descriptions = new Map<string, StatementDescription>()
const MAX_DESCRIPTIONS = 1000

const TARGET: Record<string, RegExp> = {
  INSERT: /^insert\s+into\s+([a-z_][\w.]*)/i,
  UPDATE: /^update\s+([a-z_][\w.]*)/i,
  DELETE: /^delete\s+from\s+([a-z_][\w.]*)/i,
}
// A read's first table, named after FROM or JOIN (`is distinct from null` names none).
const FROM = /\b(?:from|join)\s+(?!null\b)([a-z_][\w.]*)/i
// A WITH statement is named by its first data-modifying statement, if it has one.
const MODIFIES = /\b(insert\s+into|update|delete\s+from)\s+([a-z_][\w.]*)/i

/** Operation and table of a statement's text, cached per text (the texts are the code's own). */
export function describeStatement(text: string): StatementDescription {
  let found = descriptions.get(text)
  if (found) return found
  const trimmed = text.trim()
  let operation = (/^\w+/.exec(trimmed)?.[0] ?? 'SQL').toUpperCase()
  let table = (TARGET[operation] ?? FROM).exec(trimmed)?.[1]
  const modifies = operation === 'WITH' ? MODIFIES.exec(trimmed) : null
  if (modifies) {
    operation = modifies[1]!.split(/\s+/)[0]!.toUpperCase()
    table = modifies[2]
  }
  found = {
    // A day's partition or archive (`docs_search_events_20261207`) by its pattern: one name per
    // statement, not one per day.
    name: table ? `${operation} ${table.replace(/_\d{8}$/, '_YYYYMMDD')}` : operation,
    attributes: {
      'db.system.name': 'postgresql',
      'db.operation.name': operation,
      ...(table ? { 'db.collection.name': table } : {}),
      'db.query.text': trimmed.replace(/\s+/g, ' '),
    },
  }
  if (descriptions.size >= MAX_DESCRIPTIONS) descriptions.clear()
  descriptions.set(text, found)
  return found
}
