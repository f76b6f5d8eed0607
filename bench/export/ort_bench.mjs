// ONNX Runtime (CPU execution provider) images/s on an exported ftl classifier: one session with
// N intra-op threads, one warm-up run, then R rounds over all images in batches of B; prints one
// JSON line with the median round.
// usage: INTEROP_NODE_DIR=... node ort_bench.mjs MODEL.onnx IMAGES.npy --threads N --batch B [--rounds R]
// IMAGES.npy: uint8 images, or float32 NCHW for a model exported with --input float-nchw
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import path from 'node:path'
import fs from 'node:fs'

const args = process.argv.slice(2)
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? Number(args[i + 1]) : dflt }
const [modelPath, npyPath] = args
const threads = opt('--threads', 1), batch = opt('--batch', 1), rounds = opt('--rounds', 3)
const require = createRequire(path.join(process.env.INTEROP_NODE_DIR, 'package.json'))
const ort = await import(pathToFileURL(require.resolve('onnxruntime-node')).href)

// uint8 .npy (version 1 header), as tests/tools/dataset_images_npy.mjs writes it, or float32 (preprocessed)
const buf = fs.readFileSync(npyPath)
const hlen = buf.readUInt16LE(8), header = buf.toString('latin1', 10, 10 + hlen)
const shape = /'shape': \(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(Boolean).map(Number)
const isFloat = header.includes("'<f4'")
const data = buf.buffer.slice(buf.byteOffset + 10 + hlen, buf.byteOffset + buf.length)
const pixels = isFloat ? new Float32Array(data) : new Uint8Array(data)
const per = shape.slice(1).reduce((a, b) => a * b, 1), count = shape[0]

const t0 = performance.now()
const session = await ort.InferenceSession.create(modelPath, {
  executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' })
const sessionMs = performance.now() - t0
const input = session.inputNames[0], output = session.outputNames[0]
async function pass() {
  for (let i = 0; i < count; i += batch) {
    const n = Math.min(batch, count - i)
    const t = new ort.Tensor(isFloat ? 'float32' : 'uint8', pixels.subarray(i * per, (i + n) * per), [n, ...shape.slice(1)])
    const r = await session.run({ [input]: t })
    if (r[output].dims[0] !== n) throw new Error('bad output')
  }
}
await pass() // warm-up
const times = []
for (let r = 0; r < rounds; r++) {
  const s = performance.now()
  await pass()
  times.push(performance.now() - s)
}
times.sort((a, b) => a - b)
const med = times[Math.floor(times.length / 2)]
console.log(JSON.stringify({ runtime: `onnxruntime-node ${ort.env.versions?.common ?? ''}`.trim(), model: path.basename(modelPath),
  threads, batch, images: count, session_ms: +sessionMs.toFixed(1), round_ms: times.map(t => +t.toFixed(1)),
  images_per_s: +(count / (med / 1000)).toFixed(1) }))
