#!/usr/bin/env bash
# Builds gpu-bundle.tar.xz: the CUDA build of Purine (the CLI, every test and benchmark program,
# libpurine and its CUDA backend libpurine_cuda.so) with every library it needs that a GPU
# machine may lack (glog, gflags, protobuf, OpenBLAS, oneDNN, OpenMP, Open MPI with mpirun and its
# components, the C++ runtime, the CUDA runtime), the Fashion-MNIST files the tests read, the benchmark scripts and run.sh, which runs
# the GPU tests and benchmarks there (tools/gpu/run_bundle.sh). Left out: the C library and the
# dynamic loader, the GPU driver, and cuBLAS, cuDNN and NCCL, which the GPU machine brings (e.g.
# the nvidia-* Python wheels' lib folders; run.sh finds them). The archive must stay under
# 64 MiB, what travels to a lent GPU machine; the script fails when it does not.
#
# Usage: bash tools/gpu/bundle.sh [out=gpu-bundle]   (builds build/ first, with tools/build.sh)
# Then, where the GPU is: tar xJf gpu-bundle.tar.xz && gpu-bundle/run.sh [tests|bench|all]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu-bundle}
bash tools/build.sh >/dev/null
[ -f build/libpurine_cuda.so ] ||
  { echo "error: build/ has no CUDA backend (cmake found no nvcc, cuDNN or NCCL)" >&2; exit 1; }

rm -rf "$out" "$out.tar.xz"
mkdir -p "$out"/{bin,lib,share,tools/bench,tools/gpu}
find build/tools build/tests -maxdepth 1 -type f -executable \
  \( -name purine -o -name merge_traces -o -name 'bench_*' -o -name 'test_*' \) \
  -exec cp {} "$out/bin/" \;
cp -a build/libpurine.so* build/libpurine_cuda.so "$out/lib/"  # the backend beside libpurine
# mpirun, and orted, which a process started without mpirun needs for MPI_Init.
cp "$(readlink -f "$(command -v mpirun)")" "$out/bin/mpirun"
cp "$(readlink -f "$(command -v orted)")" "$out/bin/orted"
# Open MPI's components and help files, laid out as under /usr, so that OPAL_PREFIX=<bundle>
# relocates them (its pkglibdir is <prefix>/lib/x86_64-linux-gnu/openmpi/lib/openmpi3).
ompi_path() { ompi_info --path "$1" --parsable | sed "s/^path:$1://"; }
components=$(ompi_path pkglibdir)
bundle_components="$out${components#/usr}"
mkdir -p "$bundle_components"
cp "$components"/*.so "$bundle_components/"
cp -r "$(ompi_path pkgdatadir)" "$out/share/openmpi"

# Every library those need, resolved on this machine, but the ones the GPU machine must own.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libcublas|libcublasLt|libcudnn|libnccl)'
for f in "$out"/bin/* "$out"/lib/libpurine.so.* "$out"/lib/libpurine_cuda.so "$bundle_components"/*.so; do
  { ldd "$f" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -Ln "$path" "$out/lib/$name"
done
cp -r /usr/share/datasets/fashion-mnist "$out/share/fashion-mnist"
cp tools/bench/*.sh tools/bench/*.py "$out/tools/bench/"
cp -r tools/sim "$out/tools/"
cp tools/gpu/run_bundle.sh "$out/run.sh"
git rev-parse --short HEAD >"$out/VERSION" 2>/dev/null || echo unknown >"$out/VERSION"

tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
bytes=$(stat -c %s "$out.tar.xz")
echo "$out.tar.xz: $((bytes / 1048576)) MiB ($(du -sh "$out" | cut -f1) unpacked)"
# A lent machine takes 64 MiB with the working tree (a few MiB): 60 for the bundle.
[ "$bytes" -lt $((60 << 20)) ] || { echo "error: the bundle exceeds 60 MiB" >&2; exit 1; }
