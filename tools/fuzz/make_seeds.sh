#!/usr/bin/env bash
# Writes the seed inputs of the fuzz targets into tests/fuzz_corpus/{idx,checkpoint,image}/seed-*:
# valid files, raw and gzip, in the input layouts of tools/fuzz/idx_input.hpp and
# checkpoint_input.hpp, and small PNG and PGM images of every kind the image reader converts. The output is deterministic; the seeds are checked in, so run this only
# after changing a layout.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz_corpus
mkdir -p "$out/idx" "$out/checkpoint" "$out/image"

python3 - "$out/idx" <<'PY'
import gzip, struct, sys
out = sys.argv[1]

def images(count, rows, cols):
    return struct.pack(">IIII", 0x803, count, rows, cols) + bytes(
        (i * 7) & 255 for i in range(count * rows * cols))

def labels(count):
    return struct.pack(">II", 0x801, count) + bytes(i % 10 for i in range(count))

def gz(data):
    return gzip.compress(data, mtime=0)

def seed(name, mode, image_file, label_file):
    with open(f"{out}/seed-{name}", "wb") as f:
        f.write(bytes([mode]) + struct.pack("<H", len(image_file)) + image_file + label_file)

for mode in (0, 1):
    seed(f"raw-{mode}", mode, images(5, 3, 2), labels(5))
    seed(f"gzip-{mode}", mode, gz(images(5, 3, 2)), gz(labels(5)))
seed("mixed-1", 1, gz(images(12, 4, 4)), labels(12))
seed("two-members-1", 1, gz(images(3, 2, 2)[:20]) + gz(images(3, 2, 2)[20:]), gz(labels(3)))
seed("empty-1", 1, images(0, 1, 1), labels(0))
for mode in (6, 7):  # the harness gzips both files
    seed(f"gzipped-{mode}", mode, images(5, 3, 2), labels(5))
PY

# Checkpoints of the fuzz graph (w [2,3], s [3]), written by protoc from text.
# Layout byte 1: the harness frames the payload with a valid header (checkpoint_input.hpp).
encode() {
  printf '\001'
  protoc --proto_path=proto --encode=purine.proto.Checkpoint proto/purine.proto
}
encode > "$out/checkpoint/seed-plain" <<'TXT'
model: "tiny" iteration: 42 ranks: 1 layout: "plain"
rng_states { key: "rank0:cpu" value: "1 2 3" }
tensors { name: "w" tensor { shape: [2, 3] data: [0, 0.5, 1, 1.5, 2, 2.5] } }
tensors { name: "s" tensor { shape: [3] data: [0, -1, -2] } }
TXT
encode > "$out/checkpoint/seed-minimal" <<'TXT'
model: "tiny" iteration: 7
tensors { name: "s" tensor { shape: [3] data: [1, 2, 3] } }
tensors { name: "w" tensor { shape: [2, 3] data: [1, 2, 3, 4, 5, 6] } }
TXT
# Refused: a tensor the graph lacks.
encode > "$out/checkpoint/extra-tensor" <<'TXT'
model: "tiny" iteration: 7
tensors { name: "s" tensor { shape: [3] data: [1, 2, 3] } }
tensors { name: "w" tensor { shape: [2, 3] data: [1, 2, 3, 4, 5, 6] } }
tensors { name: "extra" tensor { shape: [1] data: [9] } }
TXT
# Images, 3x2 pixels, PNG written here chunk by chunk (no imaging library needed).
python3 - "$out/image" <<'PY'
import struct, sys, zlib
out = sys.argv[1]

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

# `rows` are the scanlines as stored (for an interlaced image, those of its Adam7 passes), each
# given filter type 0; the image is 3 pixels wide and `height` high.
def png(name, depth, colour, rows, extra=b"", interlace=0, height=2):
    header = struct.pack(">IIBBBBB", 3, height, depth, colour, 0, 0, interlace)
    raw = b"".join(b"\0" + row for row in rows)
    with open(f"{out}/seed-{name}", "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))

png("gray8.png", 8, 0, [bytes([0, 128, 255]), bytes([1, 2, 3])])
png("gray1.png", 1, 0, [bytes([0b10100000]), bytes([0b01000000])])
png("gray16.png", 16, 0, [struct.pack(">HHH", 0, 32768, 65535), struct.pack(">HHH", 1, 2, 3)])
png("rgb8.png", 8, 2, [bytes([255, 0, 0, 0, 255, 0, 0, 0, 255]), bytes(9)])
png("rgba8.png", 8, 6, [bytes([255, 255, 255, 128] * 3), bytes([10, 20, 30, 255] * 3)])
png("palette-trns.png", 8, 3, [bytes([0, 1, 0]), bytes([1, 0, 1])],
    chunk(b"PLTE", bytes([0, 0, 0, 200, 100, 50])) + chunk(b"tRNS", bytes([255, 0])))
# 3x2 in Adam7: pass 1 holds pixel (0,0), pass 4 (2,0), pass 6 (1,0), pass 7 the second row.
png("interlaced.png", 8, 0, [bytes([0]), bytes([255]), bytes([128]), bytes([1, 2, 3])],
    interlace=1)
with open(f"{out}/seed-gray8.pgm", "wb") as f:
    f.write(b"P5\n# a comment\n3 2\n255\n" + bytes([0, 128, 255, 1, 2, 3]))
with open(f"{out}/seed-gray16.pgm", "wb") as f:
    f.write(b"P5 3 2 1000\n" + struct.pack(">HHHHHH", 0, 500, 1000, 1, 2, 3))
PY
ls -l "$out"/idx "$out"/checkpoint "$out"/image
