#!/usr/bin/env node
// nn_ort_batch.mjs MANIFEST: runs every case of the nn per-op manifest through ONNX Runtime in one
// node process (start-up is ~1 s per process) and writes each case's expected output .npy.
// Manifest lines: NAME MODEL INPUT.npy OUTPUT.npy TOLERANCE (paths relative to the manifest).
// Uses $SHARED/tools/interop (onnxruntime-node, pinned) with graph optimisations disabled (ORT_GRAPH_OPT=all:
// enabled, e.g. QDQ pairs fused into its integer kernels) and one thread.
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const shared = process.env.SHARED
if (!shared) { console.error('SHARED must be set'); process.exit(2) }
const interop = path.join(shared, 'tools', 'interop')
const { loadPkg } = await import(pathToFileURL(path.join(interop, 'interop_common.mjs')).href)
const { readNpy, writeNpy } = await import(pathToFileURL(path.join(interop, 'onnx_run.mjs')).href)
const ort = (await loadPkg('onnxruntime-node')).default

const manifest = process.argv[2]
const dir = path.dirname(manifest)
let failed = 0
for (const line of fs.readFileSync(manifest, 'utf8').split('\n')) {
  const f = line.trim().split(/\s+/)
  if (f.length < 4) continue
  const [name, model, input, output] = f
  try {
    const sess = await ort.InferenceSession.create(path.join(dir, model), {
      executionProviders: ['cpu'], graphOptimizationLevel: process.env.ORT_GRAPH_OPT || 'disabled', intraOpNumThreads: 1, interOpNumThreads: 1,
    })
    const x = readNpy(path.join(dir, input))
    const res = await sess.run({ [sess.inputNames[0]]: new ort.Tensor(x.type, x.data, x.shape) })
    const y = res[sess.outputNames[0]]
    writeNpy(path.join(dir, output), y.type, y.dims, y.data)
    console.log(`ok ort ${name} ${JSON.stringify(Array.from(y.dims))}`)
  } catch (e) {
    failed++
    console.log(`FAIL ort ${name}: ${e && e.message || e}`)
  }
}
process.exitCode = failed ? 1 : 0
