// Rewrites a dataset through two independent Parquet libraries: DuckDB runs SQL over the rows (the
// view `src` is IN), hyparquet-writer writes the result with IN's key-value metadata (KEY=VALUE
// pairs replace or add keys) and no column statistics, so readers must look at the rows themselves.
// For datasets ftl prep never writes (labels outside the class list, classes without rows).
// usage: node dataset_rewrite.mjs IN.parquet OUT.parquet "SELECT label, image, path FROM src" [KEY=VALUE ...]
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import path from 'node:path'

const [input, out, sql, ...pairs] = process.argv.slice(2)
const dir = process.env.INTEROP_NODE_DIR
if (!dir || !input || !out || !sql) {
  console.error('usage: INTEROP_NODE_DIR=... node dataset_rewrite.mjs IN.parquet OUT.parquet SQL [KEY=VALUE ...]')
  process.exit(1)
}
const require = createRequire(path.join(dir, 'package.json'))
const { DuckDBInstance } = await import(pathToFileURL(require.resolve('@duckdb/node-api')).href)
const { parquetWriteFile } = await import(pathToFileURL(require.resolve('hyparquet-writer')).href)
const db = await DuckDBInstance.create(':memory:', { threads: '1' })
const con = await db.connect()
const quoted = input.replace(/'/g, "''")
await con.run(`CREATE VIEW src AS SELECT * FROM read_parquet('${quoted}', file_row_number = true) ORDER BY file_row_number`)
const rows = (await con.runAndReadAll(`SELECT label, image, path FROM (${sql})`)).getRows()
const kv = new Map()
for (const [k, v] of (await con.runAndReadAll(`SELECT decode(key), decode(value) FROM parquet_kv_metadata('${quoted}')`)).getRows())
  kv.set(k, v)
for (const p of pairs) {
  const eq = p.indexOf('=')
  if (eq < 1) { console.error(`not KEY=VALUE: ${p}`); process.exit(1) }
  kv.set(p.slice(0, eq), p.slice(eq + 1))
}
parquetWriteFile({
  filename: out,
  statistics: false,
  columnData: [
    { name: 'label', data: Int32Array.from(rows.map(r => Number(r[0]))), type: 'INT32' },
    { name: 'image', data: rows.map(r => r[1].bytes), type: 'BYTE_ARRAY' },
    { name: 'path', data: rows.map(r => r[2]), type: 'STRING' },
  ],
  kvMetadata: [...kv].map(([key, value]) => ({ key, value })),
})
process.stdout.write(JSON.stringify({ rows: rows.length }) + '\n')
