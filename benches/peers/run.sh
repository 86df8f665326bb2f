#!/usr/bin/env bash
# flowjit against its peers on the articles' register machine running square.bc, all in one run
# run on the same input: a plain C switch interpreter (gcc -O2), the same interpreter in
# Python under CPython and under PyPy, in Lua under LuaJIT, the square loop written directly
# in C (the limit), and flowjit: its interpreter, its tracing JIT (meta-tracing the bundled
# interpreter), and the partially evaluated interpreter compiled whole.
#
#   benches/peers/run.sh              # A=10000000, 3 runs each (CPython: 1)
#   A=1000000 RUNS=5 benches/peers/run.sh
#
# Every time is a whole process, start-up and compilation included, timed by hyperfine;
# the table gives the median and its ratio to the direct C loop.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
A="${A:-10000000}"
RUNS="${RUNS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Install what is missing, from the distribution's packages.
# shellcheck source=need.sh
source "$here/need.sh"
need gcc pypy3 luajit hyperfine
CPYTHON="${CPYTHON:-$(command -v python3)}"

gcc -O2 -o "$work/regmachine" "$here/regmachine.c"
gcc -O2 -o "$work/square" "$here/square.c"
gcc -O2 -o "$work/loops" "$here/loops.c"
(cd "$root" && cargo build --release --quiet)
flowjit="$root/target/release/flowjit"
code="bytecode=[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]"

expected=$((A * A))
names=()
commands=()
add() { names+=("$1"); commands+=("$2"); }
add "C loop, direct (gcc -O2)" "$work/square $A"
add "C switch interpreter (gcc -O2)" "$work/regmachine $A"
add "LuaJIT" "luajit $here/regmachine.lua $A"
add "PyPy" "pypy3 $here/regmachine.py $A"
add "CPython" "$CPYTHON $here/regmachine.py $A"
add "flowjit JIT (meta-tracing)" "$flowjit bytecode $root/examples/square.bc a=$A"
add "flowjit pe --compile" "$flowjit pe $root/examples/regmachine.fg --entry bytecode_loop $code pc=0 --compile --run a=$A r0=0 r1=0 r2=0"
add "flowjit interpreter" "$flowjit bytecode $root/examples/square.bc a=$A --mode interp"

# Each must print the square before it is timed.
time_all "$work" "$expected" "CPython|flowjit interpreter"

# Direct flowgraph loops against the same loops in C.
loops=("C power x=1 y=100000000|$work/loops power 1 100000000"
       "flowjit power.fg x=1 y=100000000|$flowjit run $root/examples/power.fg x=1 y=100000000"
       "C promotion x=5 i=1000000000|$work/loops promotion 5 1000000000"
       "flowjit promotion.fg from b, x=5 i=1000000000|$flowjit run $root/examples/promotion.fg --entry b x=5 i=1000000000")
for i in "${!loops[@]}"; do
    echo "timing ${loops[$i]%%|*} ($RUNS runs)" >&2
    hyperfine --style none --runs "$RUNS" --warmup 0 --export-json "$work/loop$i.json" "${loops[$i]#*|}" >/dev/null
done

python3 - "$work" "$A" "${names[@]}" <<'PY'
import json, sys
work, a, names = sys.argv[1], sys.argv[2], sys.argv[3:]
medians = [json.load(open(f"{work}/{i}.json"))["results"][0]["median"] for i in range(len(names))]
base = medians[0]
print(f"square of {a} on the register machine ({len(names)} implementations, one run)")
print(f"| implementation | median | ratio to the direct C loop |")
print(f"| --- | --- | --- |")
for name, m in zip(names, medians):
    shown = f"{m:.3f} s" if m >= 1 else f"{m * 1e3:.1f} ms"
    print(f"| {name} | {shown} | {m / base:.2f}x |")
jit = medians[names.index("flowjit JIT (meta-tracing)")]
print()
print(f"flowjit JIT: {medians[names.index('flowjit interpreter')] / jit:.0f}x its interpreter, "
      f"{medians[names.index('C switch interpreter (gcc -O2)')] / jit:.1f}x the C switch interpreter, "
      f"{jit / base:.2f}x the direct C loop")
loop = [json.load(open(f"{work}/loop{i}.json"))["results"][0]["median"] for i in range(4)]
print()
print("direct flowgraph loops against the same loops in C (whole processes)")
print("| loop | C (gcc -O2) | flowjit JIT | ratio |")
print("| --- | --- | --- | --- |")
for name, c, f in [("power, x=1 y=100000000", loop[0], loop[1]), ("promotion, x=5 i=1000000000", loop[2], loop[3])]:
    print(f"| {name} | {c * 1e3:.1f} ms | {f * 1e3:.1f} ms | {f / c:.2f}x |")
PY
