#!/usr/bin/env bash
# run.sh of the GPU bundle (made by tools/gpu/bundle.sh): runs Purine's GPU tests and benchmarks
# on a machine with an NVIDIA GPU and driver, using only the bundle and that machine's cuBLAS,
# cuDNN (and NCCL), found in the nvidia-* Python wheels of its python3 or under
# /usr/local/cuda, or given in PURINE_CUDA_LIBS (colon-separated folders).
#
# Usage: run.sh [TARGET...|exec COMMAND...]; the targets (default all):
#   quick     fits a short lease, estimated 6-7 minutes on an H200 (about 5 before the fused-kernel
#             and run-ahead columns; not yet run in this form): the GPU tests with a time limit
#             each, one round of the GPU benchmark of 30 iterations (mlp, convnet, GoogLeNet),
#             GoogLeNet's cuDNN choices, --math=exact, --nodeterministic and --nofuse, mlp and
#             convnet fused against --nofuse with their device operations per replay; KEEP=folder
#             keeps its traces and log
#   accuracy  googlenet_small's test accuracy after 400 iterations on the GPU and on the CPU, two
#             seeds each (tools/bench/gpu_accuracy.sh), at most 9 minutes: a call of its own
#   resnet    ResNet-50 at batch 128 against PyTorch, FP32 and TF32, one round (about 2 minutes)
#   scale     about 3.5 minutes on 16 cores: the CPU-rank benchmarks of bench, shortened:
#             allreduce on 2, 4 and 8 ranks, weak scaling over 1 to 8 ranks against the machine's
#             ceiling with traces of each layout, and purine simulate against 4 and 8 real ranks
#   tests, bench, all
# Needs root only to make the data set visible at /usr/share/datasets/fashion-mnist, where the
# tests look for it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Several targets in one call, one after the other (one lease's start for all; a device call may
# run 10 minutes: quick and accuracy take one each, scale and resnet fit in one); the status
# is the first failure's. KEEP=folder keeps logs and traces there (files of its own each).
if [ $# -gt 1 ] && [ "$1" != exec ]; then
  status=0
  for target in "$@"; do
    bash "$0" "$target"
    rc=$?
    [ $status = 0 ] && status=$rc
  done
  exit $status
fi
what=${1:-all}
case $what in
  tests | bench | all | quick | scale | accuracy | resnet | exec) ;;
  *) echo "error: unknown target '$what' (tests, bench, all, quick, scale, accuracy, resnet, exec)" >&2
     exit 2 ;;
esac
step() { printf '\n== %s\n' "$*"; }
# KEEP: created, and absolute (gpu_vs_pytorch.sh runs from the bundle's root).
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP" && KEEP=$(cd "$KEEP" && pwd) && export KEEP
fi
# images/s of a `purine train --summary` file, or "failed" where the run wrote none.
rate_of() { grep -o '"images_per_sec": *[0-9.]*' "$1" 2>/dev/null || echo failed; }

cuda_libs=${PURINE_CUDA_LIBS:-}
if [ -z "$cuda_libs" ]; then
  cuda_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = set()
for root in roots:
    for lib in glob.glob(os.path.join(root, "**", "lib*.so*"), recursive=True):
        name = os.path.basename(lib)
        if name.startswith(("libcublas", "libcudnn", "libnccl", "libcudart")):
            dirs.add(os.path.dirname(lib))
print(":".join(sorted(dirs)))
PY
)
  [ -d /usr/local/cuda/lib64 ] && cuda_libs="$cuda_libs:/usr/local/cuda/lib64"
fi
export LD_LIBRARY_PATH="$here/lib:${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH" OPAL_PREFIX="$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Shared memory and TCP between local ranks; the bundle carries no UCX or libfabric plugins.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc=^ucx,rdma
export OMPI_MCA_mca_base_component_show_load_errors=0
# PMIx warns on stderr that it has no compression library, before a program's first line.
export PMIX_MCA_pcompress_base_silence_warning=1
# The test programs find the CLI as $PURINE_BINARY_DIR/tools/purine.
mkdir -p "$here/tools"
ln -sf "$here/bin/purine" "$here/tools/purine"
export PURINE_BINARY_DIR="$here" PURINE_SOURCE_DIR="$here"
data=/usr/share/datasets/fashion-mnist
if [ ! -e "$data" ]; then
  mkdir -p "$(dirname "$data")" && ln -s "$here/share/fashion-mnist" "$data" ||
    echo "warning: cannot link $data; the tests that train will skip"
fi

# run.sh exec COMMAND...: one command of the bundle (purine, a test program) in this environment.
if [ "$what" = exec ]; then
  shift
  exec "$@"
fi
echo "bundle $(cat "$here/VERSION"); CUDA libraries from: ${cuda_libs:-nowhere}"
missing=$(ldd "$here/bin/purine" "$here/lib/libpurine.so."* "$here/lib/libpurine_cuda.so" |
  grep "not found" | sort -u)
[ -z "$missing" ] || { echo "error: libraries not found:"; echo "$missing"; exit 1; }
step "devices"
# Without its backend Purine trains on the CPU and says why; here that is a failure.
devices=$(purine devices) || exit 1
echo "$devices"
if grep -q "no GPU backend" <<<"$devices"; then exit 1; fi
status=0
limit() { if [ "$what" = quick ]; then timeout 150 "$@"; else "$@"; fi; }
if [ "$what" = tests ] || [ "$what" = all ] || [ "$what" = quick ]; then
  step "GPU tests"
  limit test_dispatcher "[device]" || status=1
  limit test_operators "[cuda]" || status=1
  limit test_purine "[gpu]" || status=1
  limit test_train "[gpu],[devices]" || status=1
  limit test_tools "purine devices*" || status=1
fi
if [ "$what" = quick ]; then
  step "GPU training: Purine against PyTorch on this GPU (one round, 30 iterations)"
  MODELS="mlp convnet googlenet" ROUNDS=1 TORCH_MODES="eager benchmark graph" RUN_TIMEOUT=60 \
    PURINE_BIN="$here/bin/purine" bash "$here/tools/bench/gpu_vs_pytorch.sh" 30 || status=1
  step "cuDNN's algorithms for GoogLeNet's convolutions (FP32, batch 128): what the rules cost"
  log=${KEEP:-/tmp}/conv-algorithms.log
  GLOG_v=1 GLOG_logtostderr=1 timeout 90 purine train --model=googlenet --device=0 \
    --data=synthetic:3x224x224:1000 --batch=128 --max-iters=2 --noevaluate >/dev/null 2>"$log"
  python3 "$here/tools/bench/conv_choices.py" "$log" || status=1
  echo "fused convolutions cuDNN refused (run as three calls): $(grep -c 'does not support the fused' "$log")"
  # --nofuse: every op unfused (conv, bias, relu), against the fused default of the run above;
  # TF32 with the fastest algorithms of all (what cudnn.benchmark may pick), against the TF32 row.
  for flags in --math=exact --nodeterministic --nofuse "--math=tf32 --nodeterministic"; do
    rm -f /tmp/summary.json
    timeout 90 purine train --model=googlenet --device=0 --data=synthetic:3x224x224:1000 \
      --batch=128 --max-iters=30 --noevaluate $flags --summary=/tmp/summary.json >/dev/null
    echo "googlenet, batch 128, $flags: $(rate_of /tmp/summary.json)"
  done
  # The small models, where launches dominate: fused (bias_relu, bias_relu_grad, one update
  # kernel per set of attributes) against --nofuse, with each run's device operations per CUDA
  # graph replay; and --math=exact (cuBLAS's pedantic math, the default's until 2026-11-26; for
  # convnet also no Winograd). One round: a GPU's figures move less than these CPUs'.
  # With --v=1 a fused inner product whose cuBLASLt epilogue is missing says it "runs apart".
  for model in mlp convnet; do
    for flags in --fuse --nofuse --math=exact; do
      rm -f /tmp/summary.json
      GLOG_logtostderr=1 timeout 60 purine train --model=$model --device=0 \
        --data=synthetic:1x28x28:10 --batch=64 \
        --max-iters=300 --noevaluate $flags --summary=/tmp/summary.json --v=1 >/tmp/run.log 2>&1
      echo "$model, batch 64, $flags: $(rate_of /tmp/summary.json); $(grep '^CUDA graphs' /tmp/run.log);" \
        "products run apart from their bias: $(grep -c 'run apart' /tmp/run.log)"
    done
  done
fi
if [ "$what" = resnet ]; then
  # ResNet-50 at batch 128, FP32 and TF32, one round of 30 iterations against PyTorch (the full
  # bench runs it with the other models).
  step "ResNet-50 training: Purine against PyTorch on this GPU (one round, 30 iterations)"
  MODELS=resnet50 ROUNDS=1 RUN_TIMEOUT=90 PURINE_BIN="$here/bin/purine" \
    bash "$here/tools/bench/gpu_vs_pytorch.sh" 30 || status=1
fi
if [ "$what" = accuracy ] || [ "$what" = all ]; then
  # Issue 22: googlenet_small on Fashion-MNIST reaches the CPU's accuracy band on the GPU.
  step "googlenet_small on Fashion-MNIST, 400 iterations: test accuracy on this GPU against this CPU"
  PURINE_BIN="$here/bin/purine" timeout 540 bash "$here/tools/bench/gpu_accuracy.sh" \
    googlenet_small 400 "1 2" || status=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  step "GPU training: Purine against PyTorch on this GPU"
  PURINE_BIN="$here/bin/purine" bash "$here/tools/bench/gpu_vs_pytorch.sh" || status=1
fi
if [ "$what" = bench ] || [ "$what" = all ] || [ "$what" = scale ]; then
  # scale: fewer repetitions, iterations and rounds than bench.
  if [ "$what" = scale ]; then reps=11 iters=60 rounds=1; else reps=15 iters=80 rounds=2; fi
  export PURINE_BIN="$here/bin/purine" PURINE_BENCH="$here/bin/bench_allreduce"
  step "allreduce: ring against MPI_Allreduce, 2 to 8 ranks"
  bash "$here/tools/bench/allreduce.sh" 67108864 $reps \
    "2 4 8" || status=1
  # Which part of the ring graph's pattern costs at 4 and 8 ranks, and direct steps against the
  # ring's and against machine steps with the ranks pretended on two machines (bench_allreduce's
  # header): on one host, what machine steps' runs cost beside direct steps' one sum per chunk.
  for n in 4 8; do
    echo "== $n ranks, the graph's pattern split, the ring's ways"
    machines=""
    for ((r = 0; r < n; ++r)); do machines+="${machines:+,}$((2 * r / n))"; done
    mpirun --oversubscribe -np $n "$PURINE_BENCH" --min_bytes=262144 --max_bytes=67108864 \
      --reps=7 --pattern_split --ways --machines="$machines" || status=1
  done
  if [ "$what" != scale ]; then
    step "data-parallel scaling of purine train (CPU ranks)"
    bash "$here/tools/bench/data_parallel.sh" || status=1
  fi
  step "weak scaling over 1 to 8 CPU ranks against this machine's ceiling"
  # Traced runs after the table (one merged trace per layout, and where its ranks wait), kept in
  # KEEP/traces.
  TRACE_DIR=${KEEP:-/tmp}/traces bash "$here/tools/bench/weak_scaling.sh" "1 2 4 8" $iters \
    $rounds | tee /tmp/weak_scaling.txt || status=1
  step "dispatcher hand-overs to sleeping threads (cluster files' wake_cost_us, wake_latency_us)"
  "$here/bin/bench_dispatcher" --shapes= --tbb=false | tee /tmp/hand_over.txt || status=1
  step "purine simulate against 4 and 8 real ranks (issue 24, check (b))"
  # With and without the ranks' shared memory modelled, from the ceiling measured above.
  # With the wake-up costs just measured (the cluster file has none of its own).
  WAKE_US=$(sed -n 's/.*costs the giver \(-\{0,1\}[0-9.]*\) us and the receiver starts \(-\{0,1\}[0-9.]*\) us.*/\1:\2/p' \
    /tmp/hand_over.txt) \
  RANK_SPEED=$(sed -n 's/^rank speed ([^)]*): //p' /tmp/weak_scaling.txt) \
    PURINE_MPIRUN_ARGS="--bind-to core" bash "$here/tools/bench/simulate_vs_real.sh" $iters \
    $rounds convnet 1 "ring mpi" tools/sim/clusters/host_16_cores.pbtxt "4 8" || status=1
fi
# The traces in one compressed file (a lent machine hands back few files, each of a limited size).
if [ -n "${KEEP:-}" ]; then
  traces=$(cd "$KEEP" && find . -name '*.json' | sort)
  if [ -n "$traces" ]; then
    # shellcheck disable=SC2086
    (cd "$KEEP" && tar -cJf "traces-$what.tar.xz" $traces && rm -f $traces)
  fi
fi
exit $status
