#!/usr/bin/env node
// A Hugging Face-like image table written by arrow-rs (parquet-wasm + apache-arrow): image
// struct<bytes: binary, path: string>, label int64, the class names as Hugging Face keeps them (the
// `huggingface` key-value metadata, ClassLabel), several row groups of small pages (DATA_PAGE_V2,
// snappy). The files and labels come from a list: one "LABEL<TAB>FILE" line each.
// usage: node arrow_image_table.mjs LIST.tsv OUT.parquet CLASS_NAME... (env SHARED: the shared folder)
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const [list, out, ...names] = process.argv.slice(2)
if (!list || !out || names.length === 0 || !process.env.SHARED) {
  console.error('usage: SHARED=... node arrow_image_table.mjs LIST.tsv OUT.parquet CLASS_NAME...')
  process.exit(1)
}
const common = await import(pathToFileURL(path.join(process.env.SHARED, 'tools/interop/interop_common.mjs')).href)
const pw = await common.loadPkg('parquet-wasm')
const arrow = await common.loadPkg('apache-arrow')
const rows = fs.readFileSync(list, 'utf8').split('\n').filter(Boolean).map(l => l.split('\t'))
const n = rows.length
const te = new TextEncoder()
const binary = (values, type) => {
  const off = new Int32Array(n + 1)
  values.forEach((v, i) => { off[i + 1] = off[i] + v.length })
  const bytes = new Uint8Array(off[n])
  values.forEach((v, i) => bytes.set(v, off[i]))
  return arrow.makeData({ type, length: n, nullCount: 0, valueOffsets: off, data: bytes })
}
const bytes = binary(rows.map(r => fs.readFileSync(r[1])), new arrow.Binary())
const paths = binary(rows.map(r => te.encode(path.basename(r[1]))), new arrow.Utf8())
const members = [new arrow.Field('bytes', bytes.type, true), new arrow.Field('path', paths.type, true)]
const image = arrow.makeData({ type: new arrow.Struct(members), length: n, nullCount: 0, children: [bytes, paths] })
const label = arrow.makeData({ type: new arrow.Int64(), length: n, nullCount: 0,
  data: BigInt64Array.from(rows.map(r => BigInt(r[0]))) })
const huggingface = JSON.stringify({ info: { features: { image: { _type: 'Image' },
  label: { names, _type: 'ClassLabel' } } } })
const schema = new arrow.Schema([new arrow.Field('image', image.type, true), new arrow.Field('label', label.type, false)])
const table = new arrow.Table([new arrow.RecordBatch(schema, arrow.makeData({
  type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: [image, label] }))])
const props = new pw.WriterPropertiesBuilder().setWriterVersion(pw.WriterVersion.V2).setCompression(pw.Compression.SNAPPY)
  .setDictionaryEnabled(false).setEncoding(pw.Encoding.PLAIN).setDataPageSizeLimit(256 << 10).setMaxRowGroupSize(40)
  .setKeyValueMetadata(new Map([['huggingface', huggingface]])).build()
fs.writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), props))
console.log(`${out}: ${n} rows`)
