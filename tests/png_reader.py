"""A minimal PNG reader for the bundled plugins' output, and a PNG writer for the image-preview tests."""

import struct
import zlib


def read_png(data: bytes) -> tuple[int, int, bytes]:
    """(width, height, RGB pixels) of an 8-bit RGB PNG with filter 0 on every row, as
    `encode_png` writes it; checks every chunk's CRC on the way."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, header = 8, b"", None
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert crc == zlib.crc32(kind + body)
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    assert header is not None
    width, height, depth, colour = header[:4]
    assert (depth, colour) == (8, 2)
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    assert len(raw) == stride * height and all(raw[y * stride] == 0 for y in range(height))
    return width, height, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))


def make_png(width: int, height: int, pixel=lambda x, y: (x * 40 % 256, y * 60 % 256, 128), filter_type: int = 0) -> bytes:
    rows = b"".join(
        bytes((filter_type,)) + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height)
    )
    if filter_type == 2:  # "up": store differences from the row above
        raw = bytearray()
        previous = bytes(width * 3)
        for y in range(height):
            row = b"".join(bytes(pixel(x, y)) for x in range(width))
            raw += bytes((2,)) + bytes((a - b) & 0xFF for a, b in zip(row, previous))
            previous = row
        rows = bytes(raw)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
