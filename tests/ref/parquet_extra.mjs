#!/usr/bin/env node
// Reference Parquet files beyond parquet_write_ref.mjs's label/image/path data, written by
// third-party writers (DuckDB, arrow-rs) through the interop packages:
//   duckdb_types_v1/v2   every flat type ftl reads, with nulls and all-null columns (v2: DELTA_*,
//                        BYTE_STREAM_SPLIT)
//   arrow_types_v1/v2... the same from arrow-rs (v2 pages, RLE booleans, DELTA_BYTE_ARRAY for
//                        fixed-size binary, BYTE_STREAM_SPLIT floats, dictionary on/off)
//   nested               a LIST and a STRUCT column next to flat ones (ftl must refuse them by name)
// usage: node parquet_extra.mjs OUTDIR SHARED_DIR    (prints one line per file written)
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const [outDir, shared] = process.argv.slice(2)
if (!outDir || !shared) { console.error('usage: parquet_extra.mjs OUTDIR SHARED_DIR'); process.exit(1) }
const { loadPkg } = await import(pathToFileURL(path.join(shared, 'tools/interop/interop_common.mjs')).href)

async function duckdbFiles() {
  const { DuckDBInstance } = await loadPkg('@duckdb/node-api')
  const db = await DuckDBInstance.create(':memory:', { threads: '1' })
  const con = await db.connect()
  const select = `SELECT
      CASE WHEN i % 7 = 3 THEN NULL ELSE i % 3 = 0 END AS b,
      CASE WHEN i % 5 = 1 THEN NULL ELSE ((i * 2654435761) % 2147483647 - 1073741823)::INTEGER END AS i32,
      CASE WHEN i % 6 = 2 THEN NULL ELSE (i * 1000000007 * (CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END))::BIGINT END AS i64,
      CASE WHEN i % 9 = 4 THEN NULL ELSE (i / 7.0)::FLOAT END AS f32,
      CASE WHEN i % 8 = 5 THEN NULL ELSE (i / 3.0 - 100)::DOUBLE END AS f64,
      CASE WHEN i % 4 = 0 THEN NULL ELSE 'str_' || (i % 97)::VARCHAR END AS s_dict,
      CASE WHEN i % 11 = 0 THEN NULL ELSE 'unique ' || i::VARCHAR || repeat('x', i % 13) END AS s,
      CASE WHEN i % 10 = 9 THEN NULL ELSE encode('blob' || (i * 31)::VARCHAR) END AS bin,
      (i * 3)::BIGINT AS i64_required_in_sql,
      NULL::BIGINT AS all_null_i64,
      NULL::VARCHAR AS all_null_s
    FROM range(5000) t(i)`
  for (const v of ['V1', 'V2']) {
    const f = path.join(outDir, `duckdb_types_${v.toLowerCase()}.parquet`)
    await con.run(`COPY (${select}) TO '${f}' (FORMAT parquet, ROW_GROUP_SIZE 2048, PARQUET_VERSION ${v}, COMPRESSION zstd)`)
    console.log(f)
  }
  const nested = path.join(outDir, 'nested.parquet')
  await con.run(`COPY (SELECT i::INTEGER AS id, [i, i + 1] AS tags, {'a': i, 'b': 'x' || i::VARCHAR} AS point, 'n' || i::VARCHAR AS name
                 FROM range(100) t(i)) TO '${nested}' (FORMAT parquet, COMPRESSION snappy)`)
  console.log(nested)
}

function bitmap(valid) {
  const b = new Uint8Array((valid.length + 7) >> 3)
  valid.forEach((v, i) => { if (v) b[i >> 3] |= 1 << (i & 7) })
  return b
}

async function arrowFiles() {
  const pw = await loadPkg('parquet-wasm')
  const arrow = await loadPkg('apache-arrow')
  const n = 3000
  const col = (name, type, valid, extra) => {
    const nulls = valid.filter(v => !v).length
    return { field: new arrow.Field(name, type, true),
      data: arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nulls ? bitmap(valid) : null, ...extra }) }
  }
  const valid = k => Array.from({ length: n }, (_, i) => (i * 7 + k) % 9 !== 0)
  const i32 = Int32Array.from({ length: n }, (_, i) => (i * 40503) % 65536 - 32768)
  const i64 = BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * 12345678901n - 7n * BigInt(i % 17))
  const f32 = Float32Array.from({ length: n }, (_, i) => (i % 100) / 8 - 3)
  const f64 = Float64Array.from({ length: n }, (_, i) => i * 0.001 - 1.5)
  const bools = bitmap(Array.from({ length: n }, (_, i) => i % 3 !== 1))
  const fixed = new Uint8Array(n * 16)
  for (let i = 0; i < n; i++) for (let k = 0; k < 16; k++) fixed[i * 16 + k] = (i * 13 + k * (i % 5)) & 255
  const te = new TextEncoder()
  const strs = Array.from({ length: n }, (_, i) => te.encode(i % 10 === 0 ? '' : `row ${i % 250} é`))
  const soff = new Int32Array(n + 1)
  strs.forEach((s, i) => { soff[i + 1] = soff[i] + s.length })
  const sdata = new Uint8Array(soff[n])
  strs.forEach((s, i) => sdata.set(s, soff[i]))
  const cols = [
    col('b', new arrow.Bool(), valid(1), { data: bools }),
    col('i32', new arrow.Int32(), valid(2), { data: i32 }),
    col('i64', new arrow.Int64(), valid(3), { data: i64 }),
    col('f32', new arrow.Float32(), valid(4), { data: f32 }),
    col('f64', new arrow.Float64(), valid(5), { data: f64 }),
    col('fixed16', new arrow.FixedSizeBinary(16), valid(6), { data: fixed }),
    col('s', new arrow.Utf8(), valid(7), { valueOffsets: soff, data: sdata }),
    col('all_null', new arrow.Int32(), Array(n).fill(false), { data: new Int32Array(n) }),
  ]
  const schema = new arrow.Schema(cols.map(c => c.field))
  const table = new arrow.Table([new arrow.RecordBatch(schema, arrow.makeData({
    type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: cols.map(c => c.data) }))])
  const variants = [
    ['arrow_types_v1', pw.WriterVersion.V1, null, pw.Compression.SNAPPY],
    ['arrow_types_v2', pw.WriterVersion.V2, true, pw.Compression.ZSTD],
    ['arrow_types_v2_nodict', pw.WriterVersion.V2, false, pw.Compression.GZIP],
    ['arrow_types_bss', pw.WriterVersion.V2, false, pw.Compression.UNCOMPRESSED, 'bss'],
  ]
  const fs = await import('node:fs')
  for (const [name, version, dict, codec, bss] of variants) {
    let b = new pw.WriterPropertiesBuilder().setWriterVersion(version).setCompression(codec)
      .setMaxRowGroupSize(1100).setDataPageSizeLimit(2048)
    if (dict !== null) b = b.setDictionaryEnabled(dict)
    // DuckDB reads BYTE_STREAM_SPLIT only for floats; the other types' BSS is unit-tested
    if (bss) for (const c of ['f32', 'f64']) b = b.setColumnEncoding(c, pw.Encoding.BYTE_STREAM_SPLIT)
    const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), b.build())
    const f = path.join(outDir, `${name}.parquet`)
    fs.writeFileSync(f, bytes)
    console.log(f)
  }
}

await duckdbFiles()
await arrowFiles()
