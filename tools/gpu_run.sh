#!/usr/bin/env bash
# The one command for the GPU machine: configure and build, ctest, the [cuda] tests, compute-sanitizer
# (memcheck, racecheck) on a small subset, SASS checks of a few generated cubins, timings of jitmm against
# cuBLAS (through PyTorch, which the GPU machine has), and jitmm-bench --device cuda:0. Full logs go to $OUT;
# a short summary table is printed last.
#
#   run from the project root, with .devdeps sent along (../shared/device/fetch-deps.sh makes it):
#     tools/gpu_run.sh [all|test|bench]      (default all)
#   environment: OUT (default /tmp/jitmm-gpu-out), BUILD_DIR (default /tmp/b),
#                JITMM_CUDA_BENCH_SHAPES (see tests/test_cuda.cpp), JITMM_CUDA_TILE (tuning knob)
set -u
mode=${1:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/jitmm-gpu-out}
B=${BUILD_DIR:-/tmp/b}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$root/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export JITMM_CACHE_DIR=""   # every kernel compiled in this run: compile times are real
summary="$OUT/summary.txt"
: > "$summary"

# step NAME CMD...: runs CMD with its output in $OUT/NAME.log, records rc and seconds.
step() {
    local name=$1
    shift
    local start=$SECONDS
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    printf '%-12s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - start))" >> "$summary"
    return $rc
}

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
step configure cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root/.devdeps/usr" || {
    cat "$summary"; tail -30 "$OUT/configure.log"; exit 1; }
step build cmake --build "$B" -- -k 0 || { cat "$summary"; grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
T="$B/tests/jitmm_tests"

if [ "$mode" = all ] || [ "$mode" = test ]; then
    # ctest without the GPU cases (they run next, with their full output).
    step ctest ctest --test-dir "$B" --output-on-failure -j 8 \
        -E '^cuda: (every dtype|epilogues|batches|sanitizer|timing|SM80 large)|^cuda devices|^cuda sm90: (wgmma|CTA pairs|jitmm_tune|split K|partial last tiles)'
    step cuda_tests "$T" "[cuda]" --durations yes
    # The same dtype, layout, epilogue and batch cases on the SM80 family, which a Hopper GPU otherwise only
    # uses for decode and staged operands.
    step cuda_sm80 env JITMM_CUDA_SM90=0 "$T" "cuda: every dtype*,cuda: epilogues*,cuda: batches*" --durations yes
    step memcheck "$sanitizer" --tool memcheck --leak-check no --error-exitcode 3 "$T" "[cuda-sanitize]"
    step racecheck "$sanitizer" --tool racecheck --error-exitcode 3 "$T" "[cuda-sanitize]"
    step synccheck "$sanitizer" --tool synccheck --error-exitcode 3 "$T" "[cuda-sanitize]"
fi

if [ "$mode" = all ] || [ "$mode" = bench ]; then
    # jitmm timings (CUDA events), with the generated sources and cubins dumped for the SASS check.
    mkdir -p "$OUT/dump"
    step bench_jitmm env JITMM_DUMP_DIR="$OUT/dump" JITMM_CUDA_BENCH_CSV="$OUT/jitmm.csv" "$T" "[.cuda-bench]"
    # SASS: tensor-core (Hopper: HGMMA for f16/bf16/tf32, QGMMA for fp8, IGMMA for s8; UTMALDG = TMA loads),
    # ldmatrix and cp.async instructions present, no local memory.
    {
        for f in "$OUT"/dump/*.cubin; do
            [ -e "$f" ] || continue
            sass=$("$cuobjdump" -sass "$f" 2>&1)
            printf '%s HGMMA=%s QGMMA=%s IGMMA=%s UTMALDG=%s HMMA=%s IMMA=%s LDSM=%s LDGSTS=%s LDG=%s LDL=%s STL=%s\n' \
                "$(basename "$f")" "$(grep -c HGMMA <<< "$sass")" "$(grep -c QGMMA <<< "$sass")" \
                "$(grep -c IGMMA <<< "$sass")" "$(grep -c UTMALDG <<< "$sass")" \
                "$(grep -c HMMA <<< "$sass")" "$(grep -c IMMA <<< "$sass")" "$(grep -c LDSM <<< "$sass")" \
                "$(grep -c LDGSTS <<< "$sass")" "$(grep -c 'LDG' <<< "$sass")" "$(grep -c 'LDL' <<< "$sass")" \
                "$(grep -c 'STL' <<< "$sass")"
        done
    } > "$OUT/sass.txt" 2>&1

    # cuBLAS through PyTorch on the same shapes and layouts, same method (CUDA events, median, rotation).
    cat > "$OUT/torch_peer.py" <<'PY'
import os, sys, statistics
import torch
torch.backends.cuda.matmul.allow_tf32 = True  # f32 shapes: cuBLAS in TF32, like jitmm's tf32 kernels
dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "s8": torch.int8, "s32": torch.int32}
L2 = 50 << 20

def shapes():
    env = os.environ.get("JITMM_CUDA_BENCH_SHAPES", "")
    if env:
        for item in env.split(";"):
            if item.strip():
                m, n, k, ta, tb, i, o = item.split(",")
                yield int(m), int(n), int(k), int(ta), int(tb), i, o
        return
    for s in (2048, 4096, 8192):
        yield s, s, s, 0, 0, "bf16", "bf16"
    yield 4096, 4096, 4096, 0, 1, "bf16", "bf16"
    yield 4096, 4096, 4096, 0, 0, "f16", "f16"
    yield 4096, 4096, 4096, 0, 1, "f16", "f32"
    yield 4096, 4096, 4096, 0, 0, "f32", "f32"
    yield 4096, 4096, 4096, 0, 1, "s8", "s32"
    yield 4096, 4096, 4096, 0, 0, "s8", "s32"
    for m in (1, 16):
        for n, k in ((4096, 4096), (11008, 4096), (4096, 11008)):
            yield m, n, k, 0, 1, "bf16", "bf16"
    yield 16, 4096, 4096, 0, 0, "bf16", "bf16"
    yield 16, 4096, 4096, 0, 1, "s8", "s32"

def rand(shape, t):
    if t == "s8":
        return torch.randint(-64, 65, shape, device="cuda", dtype=torch.int8)
    return (torch.rand(shape, device="cuda") * 2 - 1).to(dt[t])

def time_it(fn, copies, runs):
    for i in range(10):
        fn(i % copies)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for i, (a, b) in enumerate(ev):
        a.record(); fn(i % copies); b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev) * 1000.0

print("m,n,k,layout,in,out,path,median_us,tflops,gbps")
for m, n, k, ta, tb, ti, to in shapes():
    esz = torch.tensor([], dtype=dt[ti]).element_size()
    ab = (m * k + k * n) * esz
    copies = max(1, min(16, -(-2 * L2 // ab)))
    A = [rand((k, m) if ta else (m, k), ti) for _ in range(copies)]
    B = [rand((n, k) if tb else (k, n), ti) for _ in range(copies)]
    opA = lambda i: A[i].t() if ta else A[i]
    opB = lambda i: B[i].t() if tb else B[i]
    path = "torch.matmul"
    try:
        if ti == "s8":
            path = "torch._int_mm"
            fn = lambda i: torch._int_mm(opA(i), opB(i))
        elif to != ti:
            path = "torch.mm(out_dtype)"
            fn = lambda i: torch.mm(opA(i), opB(i), out_dtype=dt[to])
        else:
            fn = lambda i: torch.matmul(opA(i), opB(i))
        us = time_it(fn, copies, 400 if m <= 16 else 100)
        eo = torch.tensor([], dtype=dt[to]).element_size()
        print(f"{m},{n},{k},{'T' if ta else 'N'}{'T' if tb else 'N'},{ti},{to},{path},{us:.2f},"
              f"{2*m*n*k/us*1e-6:.1f},{(ab + m*n*eo)/us*1e-3:.0f}")
    except Exception as e:
        print(f"{m},{n},{k},{'T' if ta else 'N'}{'T' if tb else 'N'},{ti},{to},{path} failed: {str(e)[:80].replace(',', ';')},,,")
    sys.stdout.flush()
    del A, B
    torch.cuda.empty_cache()

# The memory ceiling: a large device-to-device copy (bytes read + written).
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
us = time_it(lambda i: y.copy_(x), 1, 20)
print(f"# d2d copy: {2 * x.numel() / us * 1e-3:.0f} GB/s")
PY
    step bench_cublas bash -c "python3 '$OUT/torch_peer.py' > '$OUT/cublas.csv'"

    # Tuning: a few tile / split variants of the headline shapes (JITMM_CUDA_TILE), one CSV.
    tune() {  # tune VARIANT SHAPES
        env JITMM_CUDA_TILE="$1" JITMM_CUDA_BENCH_SHAPES="$2" JITMM_CUDA_BENCH_CSV="$OUT/tune.part" \
            "$T" "[.cuda-bench]" > /dev/null 2>&1
        sed 1d "$OUT/tune.part" 2>/dev/null | sed "s/^/$1,/" >> "$OUT/tune.csv"
    }
    if [ -z "${JITMM_CUDA_TILE:-}" ]; then
        : > "$OUT/tune.csv"
        big="4096,4096,4096,0,0,bf16,bf16;4096,4096,4096,0,1,s8,s32"
        for v in tiled:128x256x2x4x3 tiled:128x128x2x2x3x128 tiled:128x128x2x2x4x128 tiled:128x256x2x4x3x128 \
                 tiled:256x128x4x2x3 tiled:128x128x2x2x5; do
            tune "$v" "$big"
        done
        dec="1,4096,4096,0,1,bf16,bf16;1,11008,4096,0,1,bf16,bf16;1,4096,11008,0,1,bf16,bf16;16,4096,4096,0,1,bf16,bf16;16,11008,4096,0,1,bf16,bf16;16,4096,11008,0,1,bf16,bf16"
        for v in skinny:1x8x1 skinny:1x8x4 skinny:1x16x1 skinny:1x16x2 skinny:1x4x2 skinny:1x4x4 skinny:2x8x2; do
            tune "$v" "$dec"
        done
        step tune true
    fi

    # jitmm-bench on the device (needs CUDA support in bench/measure.cpp; logged either way).
    step jitmm_bench "$B/jitmm-bench" --device cuda:0 --m 4096 --n 4096 --k 4096 --dtype bf16 --peer cublas
fi

# ---- summary
{
    echo
    echo "== steps"
    cat "$summary"
    for f in cuda_tests memcheck racecheck synccheck; do
        [ -f "$OUT/$f.log" ] && { echo "== $f (tail)"; tail -4 "$OUT/$f.log"; }
    done
    if [ -f "$OUT/sass.txt" ]; then
        echo "== sass (cubins with local memory: $(grep -cv 'LDL=0 STL=0' "$OUT/sass.txt"))"
        head -4 "$OUT/sass.txt"
    fi
    if [ -s "$OUT/tune.csv" ]; then
        echo "== tuning (variant=median us/GB/s)"
        python3 - "$OUT/tune.csv" <<'PY'
import csv, sys, collections
rows = collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    if len(r) < 14 or not r[12]: continue
    rows[f"{r[1]}x{r[2]}x{r[3]} {r[4]} {r[5]}"].append(f"{r[0].split(':')[1]}={float(r[11]):.1f}/{r[13]}")
for k, v in rows.items():
    print(f"{k:>26}: " + " ".join(v))
PY
    fi
    if [ -f "$OUT/jitmm.csv" ]; then
        echo "== jitmm vs cuBLAS (torch), median of CUDA-event-timed runs"
        python3 - "$OUT/jitmm.csv" "$OUT/cublas.csv" <<'PY'
import csv, sys
j = list(csv.DictReader(open(sys.argv[1])))
c = {}
try:
    for line in open(sys.argv[2]):
        if line.startswith("#"):
            print(line.strip()); continue
        r = line.strip().split(",")
        if r[0] == "m" or len(r) < 10: continue
        c[tuple(r[:6])] = r
except FileNotFoundError:
    pass
print(f"{'shape':>18} {'lay':>3} {'dtype':>9} {'jit TF/s':>8} {'cuBLAS':>8} {'ratio':>6} {'jit GB/s':>8} {'cub GB/s':>8} {'nvrtc ms':>8} {'hit us':>6}  recipe")
for r in j:
    key = (r["m"], r["n"], r["k"], r["layout"], r["in"], r["out"])
    p = c.get(key)
    ct = float(p[8]) if p and p[8] else float("nan")
    cg = p[9] if p and p[9] else "-"
    jt = float(r["tflops"]) if r["tflops"] else float("nan")
    ratio = jt / ct if ct == ct and ct > 0 else float("nan")
    print(f"{r['m']+'x'+r['n']+'x'+r['k']:>18} {r['layout']:>3} {r['in']+'>'+r['out']:>9} {jt:8.1f} {ct:8.1f} {ratio:6.2f} "
          f"{r['gbps'] or '-':>8} {cg:>8} {r['compile_ms'] or '-':>8} {r['hit_us'] or '-':>6}  {r['recipe'][:60]}")
PY
    fi
} 2>&1 | tee "$OUT/table.txt"
