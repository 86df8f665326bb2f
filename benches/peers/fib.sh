#!/usr/bin/env bash
# flowjit against its peers on recursion: fib(N) by double recursion (benches/recursion/fib.fg),
# in C (gcc -O2), in Lua under LuaJIT, in Python under PyPy and CPython, and in the flowgraph
# language under flowjit's JIT (function traces calling their machine code directly) and its
# interpreter, all in one run.
#
#   benches/peers/fib.sh          # N=32, 5 runs each (CPython and the interpreter: 1)
#   N=30 RUNS=3 benches/peers/fib.sh
#
# Every time is a whole process, start-up and compilation included, timed by hyperfine; the
# table gives the median and its ratio to LuaJIT's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
N="${N:-32}"
RUNS="${RUNS:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=need.sh
source "$here/need.sh"
need gcc pypy3 luajit hyperfine

gcc -O2 -o "$work/fib" "$here/fib.c"
(cd "$root" && cargo build --release --quiet)
flowjit="$root/target/release/flowjit"

names=()
commands=()
add() { names+=("$1"); commands+=("$2"); }
add "LuaJIT" "luajit $here/fib.lua $N"
add "C (gcc -O2)" "$work/fib $N"
add "PyPy" "pypy3 $here/fib.py $N"
add "CPython" "python3 $here/fib.py $N"
add "flowjit JIT" "$flowjit run $root/benches/recursion/fib.fg n=$N"
add "flowjit interpreter" "$flowjit run $root/benches/recursion/fib.fg n=$N --mode interp"

expected="$("$work/fib" "$N")"
time_all "$work" "$expected" "CPython|flowjit interpreter"

python3 - "$work" "$N" "${names[@]}" <<'PY'
import json, sys
work, n, names = sys.argv[1], sys.argv[2], sys.argv[3:]
medians = [json.load(open(f"{work}/{i}.json"))["results"][0]["median"] for i in range(len(names))]
base = medians[0]
print(f"fib({n}) by double recursion ({len(names)} implementations, one run)")
print("| implementation | median | ratio to LuaJIT |")
print("| --- | --- | --- |")
for name, m in zip(names, medians):
    shown = f"{m:.3f} s" if m >= 1 else f"{m * 1e3:.1f} ms"
    print(f"| {name} | {shown} | {m / base:.2f}x |")
jit = medians[names.index("flowjit JIT")]
print()
print(f"flowjit JIT: {medians[names.index('flowjit interpreter')] / jit:.1f}x its interpreter, "
      f"{jit / base:.2f}x LuaJIT, {medians[names.index('PyPy')] / jit:.2f}x faster than PyPy")
PY
