"""Re-chunk a PNG so that the bytes of the section sign (0xC2 0xA7) never appear in it.

    python3 scripts/png_rechunk.py docs/images/NAME.png docs/images/NAME.png

A grep for the section sign over agentctl and docs must print nothing
(tests/unit/test_self_contained_docs.py), and grep reads binary files too. The compressed image data is kept byte for byte (the
pixels cannot change); only where it is cut into IDAT chunks moves, so that every
occurrence is split between two chunks and no chunk header or CRC makes a new one.
"""
import struct, sys, zlib

def chunks(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        yield data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length

def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

src, dst, needle = sys.argv[1], sys.argv[2], b"\xc2\xa7"
data = open(src, "rb").read()
parts = list(chunks(data))
stream = b"".join(body for kind, body in parts if kind == b"IDAT")
splits = {p + 1 for p in range(len(stream) - 1) if stream[p:p + 2] == needle}
for base in range(4096, 4096 + 2000, 7):
    cuts = sorted(splits | set(range(base, len(stream), base)) | {len(stream)})
    out, start = bytearray(data[:8]), 0
    for kind, body in parts:
        if kind == b"IDAT":
            continue
        if kind == b"IEND":
            for end in cuts:
                out += chunk(b"IDAT", stream[start:end])
                start = end
        out += chunk(kind, body)
    if needle not in out:
        rebuilt = b"".join(body for kind, body in chunks(bytes(out)) if kind == b"IDAT")
        assert rebuilt == stream
        assert zlib.decompress(rebuilt) == zlib.decompress(stream)
        open(dst, "wb").write(out)
        print(f"split {len(splits)} occurrence(s), chunk size {base}: {len(data)} -> {len(out)} bytes")
        break
else:
    sys.exit("no chunking avoids the byte pair")
