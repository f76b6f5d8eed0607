#!/usr/bin/env node
// Parquet files with struct columns (NULLs at every level), written by DuckDB (COPY ... TO) and by
// arrow-rs (parquet-wasm + apache-arrow), and DuckDB's reading of every leaf as the reference for
// ftl's nested reader (tests/unit/test_parquet_nested.c):
//   duckdb_structs_v1/v2   HF-like image struct<bytes, path>, struct in struct in struct, booleans,
//                          doubles, floats, a low-cardinality (dictionary) binary field, a list and
//                          a map (ftl must refuse those by name); PARQUET_VERSION V1 / V2 encodings
//   duckdb_images          larger binary values (an image table: struct<bytes, path> and a flat
//                          read_blob-like `content`)
//   arrow_*                required inside optional and the reverse, four levels deep, all-required
//                          structs; dictionary on/off, DATA_PAGE and DATA_PAGE_V2, small pages (many
//                          per chunk); arrow_images: many pages of large binary values
// For each NAME.parquet, NAME.json holds, per leaf (dotted path), as DuckDB reads it: the physical
// type, the maximum definition level (from the schema's repetitions), each row's definition level
// (from which struct on the path is NULL), each value's PLAIN bytes in hex ("sha256:HEX" of them
// when longer than 64 bytes; null for nulls), and its colhash v1 (the interop ColumnHasher); the
// leaves inside lists or maps under "repeated". DuckDB reads the rows in file order
// (file_row_number).
// usage: node parquet_nested.mjs OUTDIR SHARED_DIR    (prints one line per file written)
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import { pathToFileURL } from 'node:url'

const [outDir, shared] = process.argv.slice(2)
if (!outDir || !shared) { console.error('usage: parquet_nested.mjs OUTDIR SHARED_DIR'); process.exit(1) }
const common = await import(pathToFileURL(path.join(shared, 'tools/interop/interop_common.mjs')).href)
const { DuckDBInstance } = await common.loadPkg('@duckdb/node-api')
const db = await DuckDBInstance.create(':memory:', { threads: '1' })
const con = await db.connect()
const rowsOf = async sql => (await con.runAndReadAll(sql)).getRowObjectsJS()
const sq = s => `'${s.replace(/'/g, "''")}'`

// ---- DuckDB writers ----
const nullIf = (cond, expr) => `CASE WHEN ${cond} THEN NULL ELSE ${expr} END`
const structsSelect = `SELECT
  ${nullIf('i % 11 = 0', `{'bytes': ${nullIf('i % 7 = 3', "encode('img' || i::VARCHAR || repeat('x', (i % 40)::INTEGER))")},
                           'path': ${nullIf('i % 5 = 2', "'photos/c' || (i % 4)::VARCHAR || '/' || i::VARCHAR || '.jpg'")}}`)} AS image,
  (i % 4)::BIGINT AS label,
  ${nullIf('i % 13 = 0', `{'inner': ${nullIf('i % 6 = 1', `{'v': ${nullIf('i % 4 = 2', '(i * 7 - 5000)::INTEGER')},
                                                         's': ${nullIf('i % 9 = 5', "'é' || (i % 17)::VARCHAR")},
                                                         'ok': ${nullIf('i % 10 = 3', 'i % 3 = 0')}}`)},
                            'w': ${nullIf('i % 8 = 1', '(i / 8.0)::DOUBLE')},
                            'f': (i / 3.0)::FLOAT}`)} AS deep,
  {'thumb': ${nullIf('i % 3 = 0', "encode('t' || (i % 5)::VARCHAR)")}} AS dict_bin,
  {'x': (i * 1000003)::BIGINT} AS always,
  ${nullIf('i % 10 = 0', '[i, i + 1]')} AS tags,
  MAP {'k': i::INTEGER} AS m
FROM range(3000) t(i)`
const imagesSelect = `SELECT
  ${nullIf('i % 17 = 5', `{'bytes': ${nullIf('i % 9 = 4', "encode(repeat(md5(i::VARCHAR), (20 + i % 150)::INTEGER))")},
                           'path': 'photos/' || (i % 3)::VARCHAR || '/' || i::VARCHAR || '.jpg'}`)} AS image,
  ${nullIf('i % 23 = 7', "encode(repeat(md5((i * 31)::VARCHAR), (10 + i % 90)::INTEGER))")} AS content,
  (i % 3)::INTEGER AS label
FROM range(400) t(i)`

async function duckdbFiles() {
  const out = []
  for (const v of ['V1', 'V2']) {
    const f = path.join(outDir, `duckdb_structs_${v.toLowerCase()}.parquet`)
    await con.run(`COPY (${structsSelect}) TO ${sq(f)} (FORMAT parquet, ROW_GROUP_SIZE 2048, PARQUET_VERSION ${v}, COMPRESSION ${v === 'V1' ? 'snappy' : 'zstd'})`)
    out.push([f, 'duckdb'])
  }
  const f = path.join(outDir, 'duckdb_images.parquet')
  await con.run(`COPY (${imagesSelect}) TO ${sq(f)} (FORMAT parquet, ROW_GROUP_SIZE 2048, COMPRESSION uncompressed)`)
  out.push([f, 'duckdb'])
  return out
}

// ---- arrow-rs writers ----
function bitmap(valid) {
  const b = new Uint8Array((valid.length + 7) >> 3)
  valid.forEach((v, i) => { if (v) b[i >> 3] |= 1 << (i & 7) })
  return b
}

async function arrowFiles() {
  const pw = await common.loadPkg('parquet-wasm')
  const arrow = await common.loadPkg('apache-arrow')
  const te = new TextEncoder()
  const out = []
  // validity: null where pred(i); nullable=false fields get no bitmap at all
  const nulls = (n, pred) => Array.from({ length: n }, (_, i) => !pred(i))
  const data = (type, n, valid, extra) => {
    const nc = valid ? valid.filter(v => !v).length : 0
    return arrow.makeData({ type, length: n, nullCount: nc, nullBitmap: nc ? bitmap(valid) : null, ...extra })
  }
  const binary = (n, valid, gen, utf8) => {
    const vals = Array.from({ length: n }, (_, i) => (valid && !valid[i] ? new Uint8Array(0) : gen(i)))
    const off = new Int32Array(n + 1)
    vals.forEach((v, i) => { off[i + 1] = off[i] + v.length })
    const bytes = new Uint8Array(off[n])
    vals.forEach((v, i) => bytes.set(v, off[i]))
    return data(utf8 ? new arrow.Utf8() : new arrow.Binary(), n, valid, { valueOffsets: off, data: bytes })
  }
  const field = (name, d, nullable) => ({ field: new arrow.Field(name, d.type, nullable), data: d })
  const struct = (n, valid, members) =>
    data(new arrow.Struct(members.map(m => m.field)), n, valid, { children: members.map(m => m.data) })
  const pseudo = (i, len) => { // deterministic bytes
    const b = new Uint8Array(len)
    let x = (i * 2654435761) >>> 0
    for (let k = 0; k < len; k++) { x = (x * 1103515245 + 12345) >>> 0; b[k] = x >>> 24 }
    return b
  }

  function structsTable(n) {
    const imageValid = nulls(n, i => i % 11 === 0)
    const image = struct(n, imageValid, [
      field('bytes', binary(n, nulls(n, i => i % 7 === 3), i => pseudo(i, 5 + (i % 30))), true),
      field('path', binary(n, nulls(n, i => i % 5 === 2), i => te.encode(`photos/${i % 4}/${i}.jpg`), true), true)])
    // required inside optional: the struct may be null, its fields never are
    const reqInOpt = struct(n, nulls(n, i => i % 6 === 4), [
      field('id', data(new arrow.Int32(), n, null, { data: Int32Array.from({ length: n }, (_, i) => i * 3 - 700) }), false),
      field('name', binary(n, null, i => te.encode(`n${i % 50}`), true), false)])
    // optional inside required
    const optInReq = struct(n, null, [
      field('score', data(new arrow.Float64(), n, nulls(n, i => i % 4 === 1), { data: Float64Array.from({ length: n }, (_, i) => i / 7 - 20) }), true),
      field('tag', binary(n, nulls(n, i => i % 9 === 2), i => te.encode(`tag${i % 3}`)), true)])
    // outer (optional) > inner (required) > deep (optional) > z (required): definition levels 0..2
    const deep = struct(n, nulls(n, i => i % 5 === 0), [
      field('z', data(new arrow.Bool(), n, null, { data: bitmap(Array.from({ length: n }, (_, i) => i % 3 !== 0)) }), false)])
    const inner = struct(n, null, [
      field('leaf', data(new arrow.Int64(), n, nulls(n, i => i % 8 === 3), { data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * 9876543210n - 5n) }), true),
      field('deep', deep, true)])
    const outer = struct(n, nulls(n, i => i % 7 === 6), [
      field('inner', inner, false),
      field('n', data(new arrow.Int32(), n, nulls(n, i => i % 12 === 0), { data: Int32Array.from({ length: n }, (_, i) => i % 1000) }), true)])
    const allReq = struct(n, null, [
      field('a', data(new arrow.Int32(), n, null, { data: Int32Array.from({ length: n }, (_, i) => i * i) }), false)])
    const item = data(new arrow.Int32(), 2 * n, null, { data: Int32Array.from({ length: 2 * n }, (_, i) => i) })
    const tags = data(new arrow.List(new arrow.Field('item', new arrow.Int32(), false)), n, nulls(n, i => i % 10 === 0),
      { valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => 2 * i), child: item })
    return [field('image', image, true), field('req_in_opt', reqInOpt, true), field('opt_in_req', optInReq, false),
      field('outer', outer, true), field('all_req', allReq, false), field('tags', tags, true)]
  }

  function imagesTable(n) {
    const image = struct(n, nulls(n, i => i % 13 === 5), [
      field('bytes', binary(n, nulls(n, i => i % 6 === 4), i => pseudo(i, 9000 + (i % 7) * 3000)), true),
      field('path', binary(n, null, i => te.encode(`train/${i % 3}/${i}.jpg`), true), true)])
    const label = data(new arrow.Int64(), n, null, { data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 3)) })
    return [field('image', image, true), field('label', label, false)]
  }

  const variants = [
    // name, table, writer version, dictionary, codec, page bytes, row group rows, PLAIN forced
    // (else v2 without a dictionary means DELTA_* encodings)
    ['arrow_structs_v1_dict', structsTable, pw.WriterVersion.V1, true, pw.Compression.SNAPPY, 1024, 1100],
    ['arrow_structs_v2_dict', structsTable, pw.WriterVersion.V2, true, pw.Compression.ZSTD, 1024, 1100],
    ['arrow_structs_v2_delta', structsTable, pw.WriterVersion.V2, false, pw.Compression.UNCOMPRESSED, 700, 3000],
    ['arrow_structs_v2_plain', structsTable, pw.WriterVersion.V2, false, pw.Compression.SNAPPY, 500, 1500, true],
    ['arrow_structs_v1_plain', structsTable, pw.WriterVersion.V1, false, pw.Compression.GZIP, 4096, 1000],
    ['arrow_images_v2', imagesTable, pw.WriterVersion.V2, false, pw.Compression.SNAPPY, 64 << 10, 120, true],
    ['arrow_images_v1_dict', imagesTable, pw.WriterVersion.V1, true, pw.Compression.UNCOMPRESSED, 64 << 10, 300],
  ]
  for (const [name, make, version, dict, codec, pageBytes, rgRows, plain] of variants) {
    const n = make === imagesTable ? 300 : 3000
    const cols = make(n)
    const schema = new arrow.Schema(cols.map(c => c.field))
    const table = new arrow.Table([new arrow.RecordBatch(schema, arrow.makeData({
      type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: cols.map(c => c.data) }))])
    const props = new pw.WriterPropertiesBuilder().setWriterVersion(version).setCompression(codec).setDictionaryEnabled(dict)
      .setDataPageSizeLimit(pageBytes).setWriteBatchSize(64).setMaxRowGroupSize(rgRows)
    const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')),
      (plain ? props.setEncoding(pw.Encoding.PLAIN) : props).build())
    const f = path.join(outDir, `${name}.parquet`)
    fs.writeFileSync(f, bytes)
    out.push([f, 'arrow-rs'])
  }
  return out
}

// ---- DuckDB as the reference reader ----
const quoteId = s => `"${s.replace(/"/g, '""')}"`

// The schema's leaves: dotted path, path elements, physical and DuckDB types, repetition of each level.
async function leaves(f) {
  const els = await rowsOf(`SELECT name, type, repetition_type, num_children, duckdb_type FROM parquet_schema(${sq(f)})`)
  const out = []
  let i = 1
  const walk = (prefix, count) => {
    for (let k = 0; k < count; k++) {
      const e = els[i++]
      const p = [...prefix, { name: e.name, rep: e.repetition_type }]
      if (Number(e.num_children ?? 0) > 0) walk(p, Number(e.num_children))
      else out.push({ path: p, type: e.type, duckdb_type: e.duckdb_type })
    }
  }
  walk([], Number(els[0].num_children))
  return out
}

function plainBytes(type, v) {
  if (type === 'INT32') { const b = Buffer.alloc(4); b.writeInt32LE(Number(v)); return b }
  if (type === 'INT64') { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt.asIntN(64, BigInt(v))); return b }
  if (type === 'FLOAT') { const b = Buffer.alloc(4); b.writeFloatLE(Number(v)); return b }
  if (type === 'DOUBLE') { const b = Buffer.alloc(8); b.writeDoubleLE(Number(v)); return b }
  if (type === 'BOOLEAN') return Buffer.from([v ? 1 : 0])
  return Buffer.from(v, 'hex') // byte arrays come as hex from SQL
}

async function reference(f, writer) {
  const all = await leaves(f)
  const doc = { file: path.basename(f), writer, leaves: {}, repeated: [] }
  const meta = await rowsOf(`SELECT row_group_id, max(row_group_num_rows) AS n FROM parquet_metadata(${sq(f)}) GROUP BY 1 ORDER BY 1`)
  doc.row_groups = meta.map(r => Number(r.n))
  doc.rows = doc.row_groups.reduce((a, b) => a + b, 0)
  const exprs = [], kept = []
  for (const leaf of all) {
    const name = leaf.path.map(e => e.name).join('.')
    if (leaf.path.some(e => e.rep === 'REPEATED')) { doc.repeated.push(name); continue }
    // struct_extract down the path; the definition level counts the OPTIONAL levels that are not NULL
    let access = quoteId(leaf.path[0].name)
    const levels = []
    leaf.path.forEach((e, k) => {
      if (k > 0) access = `struct_extract(${access}, ${sq(e.name)})`
      if (e.rep === 'OPTIONAL') levels.push(`(${access} IS NOT NULL)::INTEGER`)
    })
    const isBytes = leaf.type === 'BYTE_ARRAY' || leaf.type === 'FIXED_LEN_BYTE_ARRAY'
    const value = !isBytes ? access : leaf.duckdb_type === 'VARCHAR' ? `hex(encode(${access}))` : `hex(${access})`
    exprs.push(`${value} AS v${kept.length}`, `${levels.length ? levels.join(' + ') : '0'} AS d${kept.length}`)
    kept.push({ name, type: leaf.type, max_def: levels.length })
  }
  const rows = await rowsOf(`SELECT ${exprs.join(', ')} FROM read_parquet(${sq(f)}, file_row_number = true) ORDER BY file_row_number`)
  kept.forEach((leaf, k) => {
    const hasher = new common.ColumnHasher(leaf.type)
    const def = [], values = []
    for (const r of rows) {
      const d = Number(r[`d${k}`]), v = r[`v${k}`]
      def.push(d)
      if (d === leaf.max_def && (v === null || v === undefined)) throw new Error(`${f}: ${leaf.name}: a NULL at level ${d}`)
      if (d < leaf.max_def) {
        hasher.addNull()
        values.push(null)
        continue
      }
      const b = plainBytes(leaf.type, v)
      hasher.add(leaf.type === 'BYTE_ARRAY' || leaf.type === 'FIXED_LEN_BYTE_ARRAY' ? new Uint8Array(b) : v)
      values.push(b.length > 64 ? 'sha256:' + createHash('sha256').update(b).digest('hex') : b.toString('hex'))
    }
    const h = hasher.finish()
    doc.leaves[leaf.name] = { physical_type: leaf.type, max_def: leaf.max_def, def, values,
      colhash: { sha256: h.sha256, nulls_sha256: h.nulls_sha256, count: h.count, null_count: h.null_count } }
  })
  return doc
}

fs.mkdirSync(outDir, { recursive: true })
const files = [...await duckdbFiles(), ...await arrowFiles()]
for (const [f, writer] of files) {
  const doc = await reference(f, writer)
  fs.writeFileSync(f.replace(/\.parquet$/, '.json'), JSON.stringify(doc))
  console.log(f)
}
