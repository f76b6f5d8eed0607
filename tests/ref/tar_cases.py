"""Tar shards that GNU tar does not write on its own, made with Python's tarfile for the tar index tests:
a pax `size` record that the header's size field (0) leaves to it, a GNU base-256 size, and a pax size
record far larger than the file. Each good shard comes with OUT/NAME.list, the reference read back by
tarfile: `sha256<TAB>size<TAB>name` per regular member.

usage: python3 tests/ref/tar_cases.py OUT_DIR   (tests/ref/gen_tar.sh runs it)"""
import hashlib, io, os, sys, tarfile

BLOCK = 512


def payload(n, seed):
    return bytes((i * 131 + seed * 7 + (i >> 8)) & 0xFF for i in range(n))


def fix_checksum(block):
    b = bytearray(block)
    b[148:156] = b" " * 8
    b[148:156] = b"%06o\0 " % sum(b)
    return bytes(b)


def patch_header(data, offset, field, value):
    start, length = field
    assert len(value) == length
    b = bytearray(data)
    b[offset + start:offset + start + length] = value
    b[offset:offset + BLOCK] = fix_checksum(b[offset:offset + BLOCK])
    return bytes(b)


def header_of(data, name):
    """Offset of the ustar header whose name field is `name` (the member's own, not its pax header)."""
    for off in range(0, len(data), BLOCK):
        if data[off:off + len(name)] == name.encode() and data[off + 156:off + 157] in (b"0", b"\0"):
            return off
    raise SystemExit("no header for " + name)


def build(fmt, members, pax_headers=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, body in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(body)
            ti.mtime = 1700000000
            if pax_headers and name in pax_headers:
                ti.pax_headers = pax_headers[name]
            tf.addfile(ti, io.BytesIO(body))
    return buf.getvalue()


def write_listing(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    lines = []
    with tarfile.open(os.path.join(out, name)) as tf:
        for m in tf.getmembers():
            if m.isreg():
                body = tf.extractfile(m).read()
                assert len(body) == m.size
                lines.append("%s\t%d\t%s\n" % (hashlib.sha256(body).hexdigest(), m.size, m.name))
    with open(os.path.join(out, name + ".list"), "w") as f:
        f.writelines(lines)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # pax size record with the header's size field 0 (as writers do for members over 8 GiB)
    members = [("a/000001.bin", payload(700, 1)), ("a/000002.bin", payload(1500, 2)), ("a/000003.cls", b"2\n")]
    data = build(tarfile.PAX_FORMAT, members, {"a/000002.bin": {"size": "1500"}})
    data = patch_header(data, header_of(data, "a/000002.bin"), (124, 12), b"00000000000\0")
    write_listing(out, "pax_size_record.tar", data)
    # GNU base-256 sizes (0x80 then big-endian), as GNU tar writes sizes of 8 GiB and more
    members = [("b/000001.bin", payload(513, 3)), ("b/000002.bin", payload(512, 4)), ("b/000003.bin", b"")]
    data = build(tarfile.GNU_FORMAT, members)
    for name, body in members:
        data = patch_header(data, header_of(data, name), (124, 12), b"\x80" + len(body).to_bytes(11, "big"))
    write_listing(out, "base256_size.tar", data)
    # bad: a pax size record of 1 TiB on a member of a few bytes
    data = build(tarfile.PAX_FORMAT, [("c/000001.bin", payload(100, 5))], {"c/000001.bin": {"size": str(1 << 40)}})
    with open(os.path.join(out, "pax_huge_size.tar"), "wb") as f:
        f.write(data)


main()
