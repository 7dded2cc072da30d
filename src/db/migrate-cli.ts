// `make migrate`: applies pending migrations to DATABASE_URL and exits.
import { createClient } from './client.js'
import { migrate } from './migrate.js'

const url = process.env.DATABASE_URL
if (!url) {
  process.stderr.write('DATABASE_URL is required for make migrate\n')
  process.exit(1)
}
const sql = createClient(url, { max: 1 })
try {
  const applied = await migrate(sql)
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'nothing to apply\n')
} finally {
  await sql.end()
}
