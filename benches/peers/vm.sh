#!/usr/bin/env bash
# flowjit against PyPy on an interpreter whose guest calls recurse: the stack machine of
# benches/recursion/vm.fg running guest fib(N), each guest call a call of its own dispatch
# function, against the same machine written in Python (benches/peers/vm.py) under PyPy,
# and flowjit's interpreter, all in one run.
#
#   benches/peers/vm.sh          # N=30, 5 runs each (the interpreter: 1)
#   N=27 RUNS=3 benches/peers/vm.sh
#
# Every time is a whole process, start-up and compilation included, timed by hyperfine; the
# table gives the median and its ratio to PyPy's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
N="${N:-30}"
RUNS="${RUNS:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=need.sh
source "$here/need.sh"
need pypy3 hyperfine

(cd "$root" && cargo build --release --quiet)
flowjit="$root/target/release/flowjit"

names=()
commands=()
add() { names+=("$1"); commands+=("$2"); }
add "PyPy" "pypy3 $here/vm.py $N"
add "flowjit JIT" "$flowjit run $root/benches/recursion/vm.fg n=$N"
add "flowjit interpreter" "$flowjit run $root/benches/recursion/vm.fg n=$N --mode interp"

expected="$(pypy3 "$here/vm.py" "$N")"
time_all "$work" "$expected" "flowjit interpreter"

python3 - "$work" "$N" "${names[@]}" <<'PY'
import json, sys
work, n, names = sys.argv[1], sys.argv[2], sys.argv[3:]
medians = [json.load(open(f"{work}/{i}.json"))["results"][0]["median"] for i in range(len(names))]
base = medians[0]
print(f"guest fib({n}) on a stack machine whose guest calls recurse ({len(names)} implementations, one run)")
print("| implementation | median | ratio to PyPy |")
print("| --- | --- | --- |")
for name, m in zip(names, medians):
    shown = f"{m:.3f} s" if m >= 1 else f"{m * 1e3:.1f} ms"
    print(f"| {name} | {shown} | {m / base:.2f}x |")
jit = medians[names.index("flowjit JIT")]
print()
print(f"flowjit JIT: {medians[names.index('flowjit interpreter')] / jit:.1f}x its interpreter, "
      f"{base / jit:.2f}x faster than PyPy")
PY
