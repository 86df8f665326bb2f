#!/usr/bin/env bash
# flowjit against its peers on a Brainfuck program (default: ../shared/bf/mandel.b, Erik
# Bosman's mandelbrot), all in one run on the same machine: the program translated command
# by command to C (bf2c.py, gcc -O2: the limit), a plain C switch interpreter (bf.c, gcc
# -O2), the same plain interpreter in Python under PyPy (bf.py) and in Lua under LuaJIT
# (bf.lua), flowjit meta-tracing examples/bf.fg (`flowjit bf`), and flowjit's first Futamura
# projection (`pe`: examples/bf.fg specialized to the program by `flowjit pe`, with
# `program` static, then compiled whole and run; the time includes specializing and
# compiling).
#
#   benches/peers/bf.sh                      # mandel.b, 1 run each
#   BF=tests/bf/hello.b RUNS=5 benches/peers/bf.sh
#   PEERS="direct c flowjit pe" benches/peers/bf.sh   # leave out PyPy and LuaJIT (minutes)
#   PEERS="direct direct-word direct-word-checked direct-value direct-value-checked flowjit" \
#       benches/peers/bf.sh
#
# The direct-* peers are the same translation with flowjit's representation, one cost at a
# time (bf2c.py --cells, --checks): 64-bit cells masked after each step, 16-byte tagged
# cells, a bounds check per access. gcc -O2 on them shows what the representation costs
# compiled well, apart from what tracing adds.
#
# Every time is a whole process, start-up and compilation included, timed by hyperfine; the
# table gives the median and its ratio to the direct translation. Each run's output is
# checked against the direct translation's first.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
BF="${BF:-$root/../shared/bf/mandel.b}"
RUNS="${RUNS:-1}"
PEERS="${PEERS:-direct c luajit pypy flowjit}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=need.sh
source "$here/need.sh"
need gcc hyperfine
if [[ " $PEERS " == *" pypy "* ]]; then need pypy3; fi
if [[ " $PEERS " == *" luajit "* ]]; then need luajit; fi

python3 "$here/bf2c.py" "$BF" > "$work/direct.c"
gcc -O2 -o "$work/direct" "$work/direct.c"
for variant in word value; do
    for checks in "" "-checked"; do
        if [[ " $PEERS " == *" direct-$variant$checks "* ]]; then
            python3 "$here/bf2c.py" "$BF" --cells "$variant" ${checks:+--checks} \
                > "$work/direct-$variant$checks.c"
            gcc -O2 -o "$work/direct-$variant$checks" "$work/direct-$variant$checks.c"
        fi
    done
done
gcc -O2 -o "$work/bf" "$here/bf.c"
(cd "$root" && cargo build --release --quiet)
flowjit="$root/target/release/flowjit"
# The program as the list `flowjit bf` gives the interpreter, for `flowjit pe`; the last
# line `pe --run` prints (the value of `print_and_stop`) is not the program's output.
python3 - "$BF" > "$work/program.arg" <<'PY'
import sys
text = open(sys.argv[1]).read()
print("program=[" + ",".join(f"'{c}'" for c in text if c in "<>+-.,[]") + "]")
PY
cat > "$work/pe.sh" <<SH
#!/bin/sh
"$flowjit" pe "$root/examples/bf.fg" "\$(cat "$work/program.arg")" --entry start --compile --run | head -n -1
SH
chmod +x "$work/pe.sh"

names=()
commands=()
for peer in $PEERS; do
    case "$peer" in
        direct) names+=("translated to C (gcc -O2)"); commands+=("$work/direct") ;;
        direct-word) names+=("translated, 64-bit cells masked"); commands+=("$work/$peer") ;;
        direct-word-checked) names+=("translated, 64-bit cells, checked"); commands+=("$work/$peer") ;;
        direct-value) names+=("translated, 16-byte tagged cells"); commands+=("$work/$peer") ;;
        direct-value-checked) names+=("translated, 16-byte cells, checked"); commands+=("$work/$peer") ;;
        c) names+=("C switch interpreter (gcc -O2)"); commands+=("$work/bf $BF") ;;
        luajit) names+=("LuaJIT interpreter"); commands+=("luajit $here/bf.lua $BF") ;;
        pypy) names+=("PyPy interpreter"); commands+=("pypy3 $here/bf.py $BF") ;;
        flowjit) names+=("flowjit bf (meta-tracing examples/bf.fg)"); commands+=("$flowjit bf $BF") ;;
        interp) names+=("flowjit bf --mode interp"); commands+=("$flowjit bf $BF --mode interp") ;;
        pe) names+=("flowjit pe+compile (examples/bf.fg specialized)"); commands+=("$work/pe.sh") ;;
        *) echo "unknown peer $peer" >&2; exit 2 ;;
    esac
done

"$work/direct" < /dev/null > "$work/expected"
for i in "${!names[@]}"; do
    ${commands[$i]} < /dev/null > "$work/got"
    if ! cmp -s "$work/got" "$work/expected"; then
        echo "${names[$i]} printed something else than the direct translation" >&2
        exit 1
    fi
done

args=()
for c in "${commands[@]}"; do args+=("$c < /dev/null"); done
hyperfine --runs "$RUNS" --export-json "$work/times.json" --style basic "${args[@]}" >&2
python3 - "$work/times.json" "${names[@]}" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
names = sys.argv[2:]
base = results[0]["median"]
print(f"| {'program':42} | median | vs {names[0]} |")
print(f"| {'-' * 42} | ---: | ---: |")
for name, r in zip(names, results):
    print(f"| {name:42} | {r['median']:.2f} s | {r['median'] / base:.2f}x |")
PY
