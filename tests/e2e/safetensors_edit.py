"""Damage and edit safetensors files for the tensor-checksum tests (json + struct, the format's own
rules; the CRCs from tests/ref/crc32c.py, written independently of ftl's).

  tensors FILE                      each tensor's name, one a line, in data order
  check FILE                        every tensor's CRC32C equals the one recorded in "ftl.crc32c" (exit 1 if not)
  flip FILE OUT TENSOR              OUT: FILE with one bit flipped in the middle of TENSOR's bytes
  strip FILE OUT                    OUT: FILE without the "ftl.crc32c" metadata (as ftl wrote files before it)
  set-meta FILE OUT KEY VALUE       OUT: FILE with metadata KEY set to VALUE (the header rewritten)
  add-float FILE OUT TENSOR DELTA   OUT: DELTA added to TENSOR's first float, its recorded CRC updated to match
"""
import json
import os
import signal
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from crc32c import crc32c  # noqa: E402

KEY = "ftl.crc32c"


def load(path):
    raw = bytearray(open(path, "rb").read())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return raw, header, 8 + n


def save(path, header, data):
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-(8 + len(head)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + bytes(data))


def tensor_names(header):
    names = [k for k in header if k != "__metadata__"]
    return sorted(names, key=lambda k: header[k]["data_offsets"][0])


def span(header, start, name):
    begin, end = header[name]["data_offsets"]
    return start + begin, start + end


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `tensors FILE | grep -m1`: no traceback when grep is done
    cmd, path = sys.argv[1], sys.argv[2]
    raw, header, start = load(path)
    meta = header.setdefault("__metadata__", {})
    if cmd == "tensors":
        print("\n".join(tensor_names(header)))
    elif cmd == "check":
        recorded = json.loads(meta[KEY])
        assert sorted(recorded) == sorted(tensor_names(header)), (sorted(recorded), tensor_names(header))
        for name in tensor_names(header):
            a, b = span(header, start, name)
            found = "%08x" % crc32c(raw[a:b])
            assert recorded[name] == found, (path, name, recorded[name], found)
        print(path, len(recorded), "tensor CRC32Cs match")
    elif cmd == "flip":
        a, b = span(header, start, sys.argv[4])
        assert b > a, "empty tensor"
        raw[a + (b - a) // 2] ^= 0x10
        open(sys.argv[3], "wb").write(raw)
    elif cmd == "strip":
        del meta[KEY]
        save(sys.argv[3], header, raw[start:])
    elif cmd == "set-meta":
        meta[sys.argv[4]] = sys.argv[5]
        save(sys.argv[3], header, raw[start:])
    elif cmd == "add-float":
        name = sys.argv[4]
        a, b = span(header, start, name)
        raw[a:a + 4] = struct.pack("<f", struct.unpack("<f", raw[a:a + 4])[0] + float(sys.argv[5]))
        recorded = json.loads(meta[KEY])
        recorded[name] = "%08x" % crc32c(raw[a:b])
        meta[KEY] = json.dumps(recorded, separators=(",", ":"))
        save(sys.argv[3], header, raw[start:])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
