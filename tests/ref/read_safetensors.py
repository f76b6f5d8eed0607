"""An independent safetensors reader (json + struct + numpy, following the format spec) used by
tests/unit/test_train_safetensors.c to read files ftl wrote.

usage: read_safetensors.py FILE   prints {"metadata": {...}, "tensors": {name: {"dtype", "shape",
"values": [repr strings]}}} and exits 1 (with a message) if the file breaks the format."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I8": "i1", "I16": "<i2", "I32": "<i4", "I64": "<i8",
          "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?"}


def main():
    data = open(sys.argv[1], "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), "header length past the end"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    assert (8 + n) % 8 == 0, "data section not 8-byte aligned"
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values()), "metadata values must be strings"
    spans, tensors = [], {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dt = np.dtype(DTYPES[e["dtype"]])
        count = int(np.prod(e["shape"])) if e["shape"] else 1
        assert end - begin == count * dt.itemsize, f"{name}: size mismatch"
        arr = np.frombuffer(body[begin:end], dtype=dt).reshape(e["shape"])
        spans.append((begin, end))
        tensors[name] = {"dtype": e["dtype"], "shape": e["shape"], "values": [repr(v) for v in arr.reshape(-1).tolist()]}
    pos = 0
    for begin, end in sorted(spans):
        assert begin == pos, "hole or overlap in the data section"
        pos = end
    assert pos == len(body), "trailing bytes after the last tensor"
    print(json.dumps({"metadata": meta, "tensors": tensors}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report, not a traceback, so the C test can show it
        print(f"read_safetensors.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
