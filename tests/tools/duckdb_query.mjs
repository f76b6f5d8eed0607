// Runs one SQL query with DuckDB (the pinned interop install) and prints the rows as a JSON array.
// An independent reader for end-to-end checks of the Parquet files ftl writes.
// usage: node duckdb_query.mjs "SELECT label, path FROM read_parquet('x.parquet')"
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import path from 'node:path'

const dir = process.env.INTEROP_NODE_DIR
if (!dir) { console.error('INTEROP_NODE_DIR is not set'); process.exit(1) }
const require = createRequire(path.join(dir, 'package.json'))
const { DuckDBInstance } = await import(pathToFileURL(require.resolve('@duckdb/node-api')).href)
const db = await DuckDBInstance.create(':memory:', { threads: '1' })
const con = await db.connect()
const rows = (await con.runAndReadAll(process.argv[2])).getRowObjectsJS()
process.stdout.write(JSON.stringify(rows, (k, v) => (typeof v === 'bigint' ? Number(v) : v)) + '\n')
