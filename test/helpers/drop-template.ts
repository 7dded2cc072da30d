// tap's `after` step: drops this run's migrated template database (test/helpers/database.ts).
import postgres from 'postgres'
import { ADMIN_URL, templateName } from './database.js'

const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`drop database if exists "${templateName()}" with (force)`)
await admin.end()
