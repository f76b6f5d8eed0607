"""CRC-32C (Castagnoli) from its definition, for checking the tensor checksums ftl writes: the
reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF, one byte-table step a byte.

usage: crc32c.py TEXT   prints the CRC of TEXT's UTF-8 bytes as 8 hex digits ("123456789" -> e3069283)"""
import sys

_POLY = 0x82F63B78


def _table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c(data, crc=0):
    """The CRC of the bytes so far (crc) extended by data."""
    c = crc ^ 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        c = table[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


if __name__ == "__main__":
    assert crc32c(b"123456789") == 0xE3069283
    print("%08x" % crc32c(sys.argv[1].encode()))
