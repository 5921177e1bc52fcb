#!/usr/bin/env bash
# Writes the seed inputs of the fuzz targets into tests/fuzz_corpus/{idx,checkpoint}/seed-*:
# valid files, raw and gzip, in the input layouts of tools/fuzz/idx_input.hpp and
# checkpoint_input.hpp. The output is deterministic; the seeds are checked in, so run this only
# after changing a layout.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz_corpus
mkdir -p "$out/idx" "$out/checkpoint"

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
ls -l "$out"/idx "$out"/checkpoint
