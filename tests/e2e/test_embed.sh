#!/usr/bin/env bash
# ftl embed on the real hymenoptera photos with the ImageNet-pretrained MobileNet v1 embedding
# model: every feature row equals ONNX Runtime's output for the same image, preprocessed
# independently here (Pillow BILINEAR 299 -> 224, x/127.5 - 1), within 1e-4; labels, paths and
# metadata carried over; bad inputs give clear errors.
source "$(dirname "$0")/lib.sh"
d=$(scratch embed)
MODEL="$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx"
DUCK="node $(dirname "$0")/../tools/duckdb_query.mjs"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --quiet 2>/dev/null || fail embed_prep "prep failed"

if "$FTL" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/val.features.parquet" --batch 13 >"$d/embed.out" 2>"$d/embed.err"; then
    pass embed_runs
else
    fail embed_runs "$(cat "$d/embed.err")"
fi

$DUCK "SELECT file_row_number AS i, label, path, hex(image) AS img FROM read_parquet('$d/ds/val.parquet', file_row_number=true) ORDER BY i" >"$d/images.json"
$DUCK "SELECT file_row_number AS i, label, path, hex(features) AS f FROM read_parquet('$d/val.features.parquet', file_row_number=true) ORDER BY i" >"$d/features.json"
$DUCK "SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('$d/val.features.parquet')" >"$d/meta.json"
# Independent preprocessing with Pillow, then ONNX Runtime.
$PY - "$d" <<'PYEOF' || fail embed_reference_input "python failed"
import json, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rows = json.load(open(d + "/images.json"))
x = np.zeros((len(rows), 3, 224, 224), np.float32)
for k, r in enumerate(rows):
    img = Image.frombytes("RGB", (299, 299), bytes.fromhex(r["img"])).resize((224, 224), Image.BILINEAR)
    x[k] = (np.asarray(img, np.float32) / 127.5 - 1.0).transpose(2, 0, 1)
np.save(d + "/x.npy", x)
PYEOF
if node "$INTEROP/onnx_run.mjs" "$MODEL" "$d/x.npy" "$d/ref.npy" --threads 2 >"$d/ort.json" 2>"$d/ort.err"; then
    pass embed_onnx_runtime_reference
else
    fail embed_onnx_runtime_reference "$(tail -5 "$d/ort.err")"
fi
$PY - "$d" "$(sha256sum "$MODEL" | cut -d' ' -f1)" <<'PYEOF' && pass embed_features_match_onnx_runtime || fail embed_features_match_onnx_runtime "see log"
import json, sys
import numpy as np
d, model_sha = sys.argv[1], sys.argv[2]
images = json.load(open(d + "/images.json"))
feats = json.load(open(d + "/features.json"))
ref = np.load(d + "/ref.npy").reshape(len(images), -1)
assert len(feats) == len(images) == 153, (len(feats), len(images))
got = np.stack([np.frombuffer(bytes.fromhex(r["f"]), "<f4") for r in feats])
assert got.shape == ref.shape == (153, 1024), (got.shape, ref.shape)
err = float(np.abs(got - ref).max())
print("max |ftl - onnxruntime| =", err, "; feature range", float(ref.min()), float(ref.max()))
assert err <= 1e-4, err
assert [r["label"] for r in feats] == [r["label"] for r in images]
assert [r["path"] for r in feats] == [r["path"] for r in images]
kv = {r["k"]: r["v"] for r in json.load(open(d + "/meta.json"))}
assert kv["ftl.backbone_sha256"] == model_sha, (kv["ftl.backbone_sha256"], model_sha)
assert kv["ftl.feature_dim"] == "1024" and kv["ftl.feature_tensor"] == "embedding"
assert json.loads(kv["ftl.classes"]) == ["ants", "bees"]
pre = json.loads(kv["ftl.preprocess"])
assert pre["scale"] == "tf" and pre["image_size"] == 299, pre
assert kv["ftl.precision"] == "fp32" and kv["ftl.conv_algorithm"] == "auto", kv
PYEOF

# Bad inputs (under sanitizers).
expect_error embed_missing_backbone_flag 2 'backbone MODEL.onnx is required' "$FTL_SAN" embed "$d/ds/val.parquet" "$d/x.parquet"
expect_error embed_missing_dataset 2 'does not exist' "$FTL_SAN" embed "$d/none.parquet" --backbone "$MODEL" "$d/x.parquet"
expect_error embed_existing_output 2 'already exists' "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/val.features.parquet"
head -c 100000 "$MODEL" >"$d/truncated.onnx"
expect_error embed_truncated_model 1 'truncated.onnx' "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$d/truncated.onnx" "$d/x.parquet"
expect_error embed_bad_precision 2 'fp64' "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --precision fp64
expect_error embed_bad_conv_algorithm 2 "'fft': expected auto or direct" "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --conv-algorithm fft
[ ! -e "$d/x.parquet" ] && pass embed_failures_leave_no_output || fail embed_failures_leave_no_output "x.parquet exists"
finish
