// Reads a dataset's images with DuckDB (an independent Parquet reader) into one uint8 .npy
// [N, S, S, 3] in file row order, and prints the rows' paths and labels as JSON. With COLUMN (e.g.
// features, of `ftl embed`'s output) that binary column's bytes instead, as uint8 [N, bytes].
// usage: node dataset_images_npy.mjs DATASET.parquet OUT.npy [COLUMN]
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import path from 'node:path'
import fs from 'node:fs'

const [file, out, column] = process.argv.slice(2)
const dir = process.env.INTEROP_NODE_DIR
if (!dir || !file || !out) { console.error('usage: INTEROP_NODE_DIR=... node dataset_images_npy.mjs DATASET.parquet OUT.npy'); process.exit(1) }
const require = createRequire(path.join(dir, 'package.json'))
const { DuckDBInstance } = await import(pathToFileURL(require.resolve('@duckdb/node-api')).href)
const db = await DuckDBInstance.create(':memory:', { threads: '1' })
const con = await db.connect()
const quoted = file.replace(/'/g, "''")
const reader = await con.runAndReadAll(
  `SELECT ${column ? '"' + column.replace(/"/g, '""') + '"' : 'image'}, path, label FROM read_parquet('${quoted}', file_row_number = true) ORDER BY file_row_number`)
const rows = reader.getRows()
const images = rows.map(r => r[0].bytes)
const size = Math.round(Math.sqrt(images[0].length / 3))
if (column ? images.some(b => b.length !== images[0].length) : images.some(b => b.length !== size * size * 3)) {
  console.error('rows of different sizes'); process.exit(1)
}
const shape = column ? `${images.length}, ${images[0].length}` : `${images.length}, ${size}, ${size}, 3`
let header = `{'descr': '|u1', 'fortran_order': False, 'shape': (${shape}), }`
const pad = 64 - ((10 + header.length + 1) % 64)
header += ' '.repeat(pad % 64) + '\n'
const head = Buffer.alloc(10)
head.write('\x93NUMPY', 0, 'latin1'); head[6] = 1; head[7] = 0; head.writeUInt16LE(header.length, 8)
fs.writeFileSync(out, Buffer.concat([head, Buffer.from(header, 'latin1'), ...images.map(b => Buffer.from(b))]))
process.stdout.write(JSON.stringify({ size, rows: rows.map(r => ({ path: r[1], label: Number(r[2]) })) }) + '\n')
