#!/usr/bin/env bash
# jitmm-warmup end to end, as a fleet would use it: compile a shape file for the CPU and for a named CUDA arch
# (NVRTC, no GPU needed) into a fresh cache, check that a second run finds everything cached, then move the
# cache through --export / --import into another folder and check that every entry arrived.
#   run_warmup_test.sh <jitmm-warmup> <work dir>
set -euo pipefail
warmup=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cat > "$work/shapes.csv" <<'CSV'
m,n,k,a_type,b_type,c_type,trans_b,epilogue
64,96,33,f32,f32,f32,0,bias_relu
7,1000,128,f32,f32,f32,1,none
128,256,64,bf16,bf16,f32,1,gelu_tanh
CSV
devices=(--device cpu)
targets=1
if ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1; then
    devices+=(--device sm_90a)
    targets=2
else
    echo "note: no NVRTC in /usr/local/cuda/lib64, so the sm_90a target is left out"
fi
expected=$((3 * targets))  # three shapes per target

json=$("$warmup" --shapes "$work/shapes.csv" "${devices[@]}" --cache-dir "$work/a" --jobs 2 --json)
echo "first run: $json"
grep -q "\"compiled\": $expected" <<< "$json" || { echo "FAIL: expected $expected compiled"; exit 1; }
grep -q '"failed": 0' <<< "$json" || { echo "FAIL: a kernel failed"; exit 1; }

json=$("$warmup" --shapes "$work/shapes.csv" "${devices[@]}" --cache-dir "$work/a" --jobs 2 --json)
echo "second run: $json"
grep -q "\"cached\": $expected" <<< "$json" || { echo "FAIL: expected $expected already cached"; exit 1; }

"$warmup" --cache-dir "$work/a" --export "$work/cache.jka"
"$warmup" --cache-dir "$work/b" --import "$work/cache.jka"
json=$("$warmup" --shapes "$work/shapes.csv" "${devices[@]}" --cache-dir "$work/b" --jobs 2 --json)
echo "after import: $json"
grep -q "\"cached\": $expected" <<< "$json" || { echo "FAIL: the imported cache misses entries"; exit 1; }
echo "warmup_cli: OK ($expected kernels per run)"
