#!/usr/bin/python3
"""Compares `ftl inspect --json --checksums --pages` output with parquet_inspect.mjs output
(DuckDB, hyparquet and arrow-rs): row counts, row groups, codecs, page counts by type/encoding
and every column checksum the engines computed. With --classes, also checks the per-class counts ftl printed against the labels of
the interop data definition, regenerated here (splitmix64 from tests/colhash_ref.py).
usage: parquet_compare.py FTL.json INSPECT.json [--classes ROWS SEED K]
Prints nothing and exits 0 when everything agrees; prints the differences and exits 1."""
import json
import os
import sys


def main():
    ftl = json.load(open(sys.argv[1]))
    ref = json.load(open(sys.argv[2]))
    diffs = []
    if not ref["cross_check"]["agree"]:
        diffs.append(f"engines disagree: {ref['cross_check']}")
    for k in ("num_rows", "num_row_groups", "created_by"):
        if ftl[k] != ref[k]:
            diffs.append(f"{k}: ftl {ftl[k]} vs engines {ref[k]}")
    for g, (a, b) in enumerate(zip(ftl["row_groups"], ref["row_groups"])):
        if a["num_rows"] != b["num_rows"]:
            diffs.append(f"row group {g}: {a['num_rows']} vs {b['num_rows']} rows")
        for ca, cb in zip(a["columns"], b["columns"]):
            for k in ("path", "codec", "num_values", "total_compressed_size", "total_uncompressed_size"):
                if ca[k] != cb[k]:
                    diffs.append(f"row group {g} column {ca['path']}: {k} {ca[k]} vs {cb[k]}")
            if "pages" in ca and ca["pages"] != cb.get("pages"):
                diffs.append(f"row group {g} column {ca['path']}: pages {ca['pages']} vs {cb.get('pages')}")
            if cb.get("page_walk_error") or (cb.get("page_crc") and cb["page_crc"]["ok"] != cb["page_crc"]["present"]):
                diffs.append(f"row group {g} column {cb['path']}: pages: {cb.get('page_walk_error')} {cb.get('page_crc')}")
    ref_kv = {kv["key"]: kv["value"] for kv in ref.get("key_value_metadata", [])}
    for kv in ftl["key_value_metadata"]:
        if kv["key"] not in ref_kv:
            diffs.append(f"metadata {kv['key']} missing in the engines' view")
    if not ref.get("columns"):
        diffs.append("the engines hashed no columns")
    for name, want in (ref.get("columns") or {}).items():
        got = ftl.get("columns", {}).get(name)
        if not got:
            diffs.append(f"column {name}: no ftl checksum")
            continue
        for k in ("count", "null_count", "sha256", "nulls_sha256"):
            if got[k] != want[k]:
                diffs.append(f"column {name} {k}: ftl {got[k]} vs engines {want[k]}")
    if "--classes" in sys.argv:
        i = sys.argv.index("--classes")
        rows, seed, k = (int(x, 0) for x in sys.argv[i + 1:i + 4])
        sys.path.insert(0, os.path.join(os.environ["SHARED"], "tools/interop/tests"))
        from colhash_ref import splitmix64
        gen = splitmix64(seed)
        counts = [0] * k
        for _ in range(rows):
            counts[next(gen) % k] += 1
        got = [c["rows"] for c in ftl.get("classes", [])]
        if got != counts:
            diffs.append(f"class counts: ftl {got} vs regenerated {counts}")
        names = [c["name"] for c in ftl.get("classes", [])]
        if names != [f"class_{j}" for j in range(k)]:
            diffs.append(f"class names: {names}")
    for d in diffs[:30]:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
