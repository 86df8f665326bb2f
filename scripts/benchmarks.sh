#!/usr/bin/env bash
# Regenerates docs/BENCHMARKS.md: runs every benchmark driver once, side by side on this
# machine, and writes the file from what they printed (nothing in it is typed by hand but
# the method section below).
#
#   scripts/benchmarks.sh                       # the full run: half an hour to an hour on 2
#                                               # cores, by the machine's load
#   RUNS=1 BF_RUNS=1 BF_PEERS="direct c flowjit pe" scripts/benchmarks.sh   # a quick run
#   OUT=/tmp/b.md RUNS=3 scripts/benchmarks.sh  # somewhere else
#   RESULTS=/tmp/r scripts/benchmarks.sh        # keep the drivers' raw output in /tmp/r
#
# Knobs: RUNS (runs per executor for `flowjit bench`, the register-machine peers, the
# square of 10^8 and the cliffs; default 5), BF_RUNS (runs per program on mandel.b, whose
# interpreters take minutes; default 3), BF_PEERS (bf.sh's PEERS; leaving out `luajit` and
# `pypy` saves most of its time; `direct` must come first, and `c`, `flowjit` and `pe` stay),
# BF (the Brainfuck program; default ../shared/bf/mandel.b:
# bf.sh cannot time a program whose translation runs in a few milliseconds), OUT (default
# docs/BENCHMARKS.md). The drivers it runs:
# `flowjit bench`, benches/peers/run.sh, benches/peers/bf.sh, benches/cliffs/run.sh, and
# hyperfine directly for the square of 10^8 and the stack machine past 64 bits. The file is written only when every driver
# succeeded; each refuses to time a wrong answer. With RESULTS=DIR the drivers' output is
# kept there, and a step whose output is already there is not run again: a run that
# stopped goes on where it stopped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
RUNS="${RUNS:-5}"
BF_RUNS="${BF_RUNS:-3}"
BF_PEERS="${BF_PEERS:-direct direct-word direct-value-checked c luajit pypy flowjit pe}"
BF="${BF:-$root/../shared/bf/mandel.b}"
OUT="${OUT:-$root/docs/BENCHMARKS.md}"
if [ -n "${RESULTS:-}" ]; then
    work="$RESULTS"
    mkdir -p "$work"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi
[ -f "$BF" ] || { echo "no Brainfuck program at $BF (set BF=...)" >&2; exit 2; }
if [ ! -f "$work/started" ]; then
    date +%s > "$work/started"
    cut -d' ' -f1-3 /proc/loadavg > "$work/load"
    git -C "$root" rev-parse --short HEAD > "$work/commit"
    git -C "$root" diff --quiet HEAD -- src runtime benches || echo " (with changes)" >> "$work/commit"
fi
started="$(cat "$work/started")"
# Whether a step's output is still to be made (a step writes it under a temporary name).
todo() { [ ! -s "$work/$1" ]; }

(cd "$root" && cargo build --release --quiet)
flowjit="$root/target/release/flowjit"
say() { echo "== $* ($(($(date +%s) - started)) s)" >&2; }

# The peers first: their scripts install gcc, PyPy, LuaJIT and hyperfine if missing.
say "register-machine peers (benches/peers/run.sh, RUNS=$RUNS)"
todo peers.md && { RUNS="$RUNS" "$root/benches/peers/run.sh" > "$work/tmp"; mv "$work/tmp" "$work/peers.md"; }

say "square of 10^8 against the C loop"
if todo square8.json; then
    gcc -O2 -o "$work/square" "$root/benches/peers/square.c"
    hyperfine -N --style none -w 2 -r "$RUNS" --export-json "$work/tmp" \
        -n "C loop, direct (gcc -O2)" "$work/square 100000000" \
        -n "flowjit JIT (meta-tracing)" "$flowjit bytecode $root/examples/square.bc a=100000000" \
        >/dev/null
    mv "$work/tmp" "$work/square8.json"
fi

say "executors side by side (flowjit bench --runs $RUNS)"
# name|program and inputs (as `flowjit bench` takes them)
benches=(
  "square.bc a=10^7 (register machine)|examples/square.bc a=10000000"
  "power.fg x=1 y=10^7|examples/power.fg x=1 y=10000000"
  "promotion.fg from b, i=10^7 x=5|examples/promotion.fg --entry b i=10000000 x=5"
  "branchy.fg n=10^7 (a bridge on parity)|tests/programs/branchy.fg n=10000000"
  "sum.fg n=10^6 (plain integers)|examples/sum.fg n=1000000"
  "boxed.fg n=10^6 (integers boxed as arrays)|examples/boxed.fg n=1000000"
  "stackvm.fg n=10^6 (a stack machine)|examples/stackvm.fg n=1000000"
  "purefunction.fg n=10^6 x=4 (promote, elidable)|examples/purefunction.fg n=1000000 x=4"
  "alloc_loop.fg n=10^6 (arrays that escape)|tests/programs/alloc_loop.fg n=1000000 bad=0"
)
for i in "${!benches[@]}"; do
    IFS='|' read -r name args <<<"${benches[$i]}"
    echo "$name" > "$work/bench$i.name"
    todo "bench$i.json" || continue
    # shellcheck disable=SC2086
    (cd "$root" && "$flowjit" bench $args --runs "$RUNS" --json) > "$work/tmp"
    mv "$work/tmp" "$work/bench$i.json"
done

say "phases (--stats --compile-on-driver, $RUNS runs each)"
stats=(
  "square.bc a=10^7|bytecode examples/square.bc a=10000000"
  "boxed.fg n=10^6|run examples/boxed.fg n=1000000"
  "stackvm.fg n=10^6|run examples/stackvm.fg n=1000000"
  "mandel.b|bf $BF"
  "sum.fg n=10^6|run examples/sum.fg n=1000000"
)
for i in "${!stats[@]}"; do
    IFS='|' read -r name args <<<"${stats[$i]}"
    echo "$name" > "$work/stats$i.name"
    for r in $(seq "$RUNS"); do
        todo "stats$i.$r" || continue
        # shellcheck disable=SC2086
        (cd "$root" && "$flowjit" $args --stats --compile-on-driver < /dev/null 2> "$work/tmp" > /dev/null)
        mv "$work/tmp" "$work/stats$i.$r"
    done
done

say "Brainfuck (benches/peers/bf.sh, RUNS=$BF_RUNS)"
if todo bf.md; then
    BF="$BF" RUNS="$BF_RUNS" PEERS="$BF_PEERS" "$root/benches/peers/bf.sh" > "$work/tmp"
    mv "$work/tmp" "$work/bf.md"
fi

say "recursion against peers (benches/peers/fib.sh, RUNS=$RUNS)"
todo fib.md && { RUNS="$RUNS" "$root/benches/peers/fib.sh" > "$work/tmp"; mv "$work/tmp" "$work/fib.md"; }

say "guest recursion against PyPy (benches/peers/vm.sh, RUNS=$RUNS)"
todo vm.md && { RUNS="$RUNS" "$root/benches/peers/vm.sh" > "$work/tmp"; mv "$work/tmp" "$work/vm.md"; }

say "recursive programs, the JIT against the interpreter (benches/recursion, RUNS=$RUNS)"
# name|program and inputs
recursion=(
  "fib.fg n=30|benches/recursion/fib.fg n=30"
  "tree.fg d=16 k=3|benches/recursion/tree.fg d=16 k=3"
  "qsort.fg n=200000|benches/recursion/qsort.fg n=200000"
  "ast.fg n=200000|benches/recursion/ast.fg n=200000"
  "vm.fg n=27|benches/recursion/vm.fg n=27"
)
for i in "${!recursion[@]}"; do
    IFS='|' read -r name args <<<"${recursion[$i]}"
    echo "$name" > "$work/recursion$i.name"
    todo "recursion$i.json" || continue
    # shellcheck disable=SC2086
    [ "$(cd "$root" && "$flowjit" run $args)" = "$(cd "$root" && "$flowjit" run $args --mode interp)" ] \
        || { echo "benchmarks: $name printed another result under the JIT" >&2; exit 3; }
    (cd "$root" && hyperfine -N -w 1 -r "$RUNS" --style none --export-json "$work/tmp" \
        -n interp "$flowjit run $args --mode interp" -n jit "$flowjit run $args" > /dev/null)
    mv "$work/tmp" "$work/recursion$i.json"
done

say "cliffs (benches/cliffs/run.sh, RUNS=$RUNS)"
todo cliffs.md && { RUNS="$RUNS" "$root/benches/cliffs/run.sh" > "$work/tmp"; mv "$work/tmp" "$work/cliffs.md"; }

say "a stack machine's sum past 64 bits (benches/cliffs/stackbig.fg beside sumsq.fg, RUNS=$RUNS)"
if todo stackbig.json; then
    for f in stackbig sumsq; do
        [ "$("$flowjit" run "$root/benches/cliffs/$f.fg" n=10000000)" = 333333283333335000000 ] \
            || { echo "benchmarks: $f.fg printed a wrong sum" >&2; exit 3; }
    done
    hyperfine -N -w 1 -r "$RUNS" --export-json "$work/tmp" \
        -n stackbig "$flowjit run $root/benches/cliffs/stackbig.fg n=10000000" \
        -n sumsq "$flowjit run $root/benches/cliffs/sumsq.fg n=10000000" > /dev/null
    mv "$work/tmp" "$work/stackbig.json"
fi

[ -f "$work/ended" ] || { date +%s > "$work/ended"; cut -d' ' -f1-3 /proc/loadavg > "$work/load-end"; }
minutes=$(( ($(cat "$work/ended") - started + 59) / 60 ))
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(uname -sr)"
load="$(cat "$work/load") at the start, $(cat "$work/load-end") at the end"
versions="$(rustc --version | cut -d' ' -f1-2), $(gcc --version | head -1 | sed 's/ (.*)//'), \
$(python3 --version), PyPy $(pypy3 --version 2>&1 | sed -n 's/^\[PyPy \([^ ]*\).*/\1/p' | head -1), \
$(luajit -v | cut -d' ' -f1-2), $(hyperfine --version)"
commit="$(tr -d '\n' < "$work/commit")"

python3 - "$work" "$OUT" "$RUNS" "$BF_RUNS" "$(basename "$BF")" "$machine" "$versions" \
    "$commit" "$(date -u -d "@$started" +%Y-%m-%d)" "$minutes" "${#benches[@]}" "${#stats[@]}" \
    "$load" "$BF_PEERS" <<'PY'
import glob, json, re, statistics, sys

(work, out, runs, bf_runs, bf_name, machine, versions, commit, day, minutes,
 n_bench, n_stats, load, bf_peers) = sys.argv[1:]
runs, bf_runs, n_bench, n_stats = int(runs), int(bf_runs), int(n_bench), int(n_stats)

def rows(path):
    """The cells of each row of the markdown tables in a driver's output."""
    found = []
    for line in open(path):
        if line.startswith("|") and not set(line) <= set("|-: \n"):
            found.append([c.strip() for c in line.strip().strip("|").split("|")])
    return found

def secs(text):
    value, unit = text.split()
    return float(value) * {"s": 1, "ms": 1e-3}[unit]

def human(s):
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.1f} ms" if s >= 1e-3 else f"{s * 1e6:.0f} µs"

def verdict(ok):
    return "met" if ok else "**missed**"

# flowjit bench, one JSON report per program.
bench = []
for i in range(n_bench):
    report = json.load(open(f"{work}/bench{i}.json"))
    by = {e["executor"]: e for e in report["executors"]}
    bench.append((open(f"{work}/bench{i}.name").read().strip(), by))
bench_by = {name.split()[0]: by for name, by in bench}

peers = rows(f"{work}/peers.md")
peer = {r[0]: r for r in peers}
sq8 = {r["command"]: r["median"] for r in json.load(open(f"{work}/square8.json"))["results"]}
wide = {r["command"]: r["median"] for r in json.load(open(f"{work}/stackbig.json"))["results"]}
bf = rows(f"{work}/bf.md")[1:]
# Each program's time as a multiple of the translation's (bf.sh's last column, computed
# before its medians are rounded).
bf_by = {r[0]: float(r[2].rstrip("x")) for r in bf}
cliffs = rows(f"{work}/cliffs.md")[1:]

# --stats: the median of each phase over the runs.
phases = []
for i in range(n_stats):
    per = {}
    compiled = ""
    for r in range(1, runs + 1):
        text = open(f"{work}/stats{i}.{r}").read()
        line = re.search(r"^time: (.*)$", text, re.M).group(1)
        for part in line.split(", "):
            what, ms, _ = part.rsplit(" ", 2)
            per.setdefault(what, []).append(float(ms))
        compiled = re.search(r"^traces compiled to machine code: (\d+)", text, re.M).group(1)
        recorded = re.search(r"^traces recorded: (\d+)", text, re.M).group(1)
        bridges = sum(int(n) for n in re.findall(r"(\d+) bridge\(s\)", text))
    med = {k: statistics.median(v) for k, v in per.items()}
    phases.append((open(f"{work}/stats{i}.name").read().strip(), med, recorded, compiled,
                   bridges))

o = []
w = o.append
w("# Benchmarks")
w("")
w("Generated by `scripts/benchmarks.sh`; do not edit by hand (change the script and run it")
w("again). Every figure below was measured by it, in the run the method describes.")
w("")
w("## Method")
w("")
w(f"- **Machine.** {machine},")
w("  a shared virtual machine on which other work runs; its load average was")
w(f"  {load}. Only ratios measured side by side in one")
w("  table should be compared; absolute times follow the load.")
w(f"- **This run.** {day}, flowjit at {commit}, {minutes} minutes.")
w(f"- **Tools.** {versions}.")
w(f"- **Runs.** {runs} per executor and program (`RUNS`), {bf_runs} per program on {bf_name}")
w("  (`BF_RUNS`); CPython and flowjit's interpreter run once on the register machine.")
w("  Medians throughout.")
if runs < 5 or bf_runs < 3:
    w("  This run used fewer than the script's defaults (`RUNS=5`, `BF_RUNS=3`), so that it")
    w("  took about half an hour on a machine this loaded; its medians are noisier for it.")
w("- **What is timed.** Whole runs. For the JIT: interpreting until a loop is hot,")
w("  recording, optimizing, compiling and the machine code. For `pe+compile`: specializing,")
w("  cleaning up and compiling the residual program whole, then running it. Where processes")
w("  are timed (hyperfine: the peers, the cliffs, the square of 10^8) start-up is included.")
w("- **Correctness first.** Every executor must print what the interpreter (or the C")
w("  translation) prints: `flowjit bench` refuses to time a wrong answer (exit status 3),")
w("  and the peer scripts compare each output before timing.")
w("- **Release build**, `opt-level = 3`, the `flowjit` binary as `cargo build --release`")
w("  makes it (mimalloc as the allocator; Cranelift compiles on a thread of its own).")
w("")

# Targets.
sq = bench_by["square.bc"]
jit_vs_interp = sq["interp"]["median_s"] / sq["jit"]["median_s"]
pj = secs(peer["flowjit JIT (meta-tracing)"][1])
pc = secs(peer["C switch interpreter (gcc -O2)"][1])
pl = secs(peer["C loop, direct (gcc -O2)"][1])
loops = [r for r in peers if len(r) == 4 and r[0].startswith(("power", "promotion"))]
loop_ratios = [float(r[3].rstrip("x")) for r in loops]
sq8_ratio = sq8["flowjit JIT (meta-tracing)"] / sq8["C loop, direct (gcc -O2)"]
boxed, plain, stack = bench_by["boxed.fg"], bench_by["sum.fg"], bench_by["stackvm.fg"]
boxed_ratio = boxed["jit"]["median_s"] / plain["jit"]["median_s"]
stack_ratio = stack["jit"]["median_s"] / plain["jit"]["median_s"]
stack_speedup = stack["interp"]["median_s"] / stack["jit"]["median_s"]
bf_base = 1.0
bf_jit = next(v for k, v in bf_by.items() if k.startswith("flowjit bf"))
bf_pe = next(v for k, v in bf_by.items() if k.startswith("flowjit pe"))
bf_c = bf_by["C switch interpreter (gcc -O2)"]
cliff_ratios = [(r[0], r[1], float(r[4].rstrip("x"))) for r in cliffs]
long_rows = {}
for name, inputs, ratio in cliff_ratios:
    long_rows[name] = (inputs, ratio)  # the last row of each program is its long run
worst = max(cliff_ratios, key=lambda c: c[2])
long_worst = max((ratio, name) for name, (_, ratio) in long_rows.items())
wide_ratio = wide["stackbig"] / wide["sumsq"]
phase = {p[0].split()[0]: p[1] for p in phases}
sq_phase = phase["square.bc"]
boxed_code = phase["boxed.fg"]["machine code"] / phase["sum.fg"]["machine code"]
to_code = sq_phase["recording"] + sq_phase["optimizing"] + sq_phase["compiling"]

w("## Targets")
w("")
w("The goals set for the project, and where this run puts them. With the machine as loaded")
w("as the method says, a figure near its bound may land on either side from run to run.")
w("")
w("| target | measured in this run | status |")
w("| --- | --- | --- |")
w(f"| JIT at least 1000x flowjit's interpreter on square 10^7 | {jit_vs_interp:.0f}x (`flowjit bench`, "
  f"in one process); {secs(peer['flowjit interpreter'][1]) / pj:.0f}x as whole processes | "
  f"{verdict(jit_vs_interp >= 1000)} |")
w(f"| JIT at least 15x the C switch interpreter (square 10^7) | {pc / pj:.1f}x | {verdict(pc / pj >= 15)} |")
w(f"| JIT within 2x of the direct C loop, start-up and compiling included (square 10^7) | "
  f"{pj / pl:.2f}x | {verdict(pj / pl <= 2)} |")
w(f"| square of 10^8 at most 1.3x the direct C loop | {sq8_ratio:.2f}x | {verdict(sq8_ratio <= 1.3)} |")
loop_text = ", ".join(r[0].split(",")[0] + " " + r[3] for r in loops)
w(f"| direct flowgraph loops within 1.5x of the same loops in C | {loop_text} | "
  f"{verdict(max(loop_ratios) <= 1.5)} |")
w(f"| hot loop to machine code under 1 ms (the register machine's square trace) | "
  f"{to_code:.2f} ms recording, optimizing and compiling (`--stats`) | {verdict(to_code < 1)} |")
w(f"| boxed integers: the machine-code loop within 1.5x of the plain loop's (n=10^6) | "
  f"{boxed_code:.2f}x in machine code (`--stats`); {boxed_ratio:.2f}x as whole runs, compiling "
  f"included | {verdict(boxed_code <= 1.5)} |")
w(f"| stack machine within 3x of the direct loop, at least 50x its interpreter (n=10^6) | "
  f"{stack_ratio:.2f}x, {stack_speedup:.0f}x | {verdict(stack_ratio <= 3 and stack_speedup >= 50)} |")
w(f"| cliffs: the JIT at most 1.1x the interpreter on each | worst {worst[2]:.2f}x ({worst[0]} "
  f"{worst[1]}) | {verdict(worst[2] <= 1.1)} |")
w(f"| cliffs: each program's long run at most 0.5x the interpreter's time | worst "
  f"{long_worst[0]:.2f}x ({long_worst[1]}) | {verdict(long_worst[0] <= 0.5)} |")
w(f"| a stack machine whose sum (in its locals array) leaves 64 bits within 3x of the same loop "
  f"written directly (n=10^7) | {wide_ratio:.2f}x | {verdict(wide_ratio <= 3)} |")
w(f"| {bf_name}: `flowjit bf` at most 2x the translation to C | {bf_jit / bf_base:.2f}x | "
  f"{verdict(bf_jit / bf_base <= 2)} |")
w(f"| {bf_name}: `flowjit bf` at least 5x faster than the C interpreter | {bf_c / bf_jit:.1f}x | "
  f"{verdict(bf_c / bf_jit >= 5)} |")
w(f"| {bf_name}: pe+compile at least as fast as the JIT | {bf_pe / bf_jit:.2f}x the JIT's time | "
  f"{verdict(bf_pe <= bf_jit)} |")
fib = {r[0]: secs(r[1]) for r in rows(f"{work}/fib.md") if len(r) == 3 and r[0] != "implementation"}
fib_jit, fib_lua = fib["flowjit JIT"], fib["LuaJIT"]
w(f"| fib(32) at least as fast as LuaJIT | {fib_jit / fib_lua:.2f}x LuaJIT's time "
  f"({fib['PyPy'] / fib_jit:.2f}x faster than PyPy) | {verdict(fib_jit <= fib_lua)} |")
vm = {r[0]: secs(r[1]) for r in rows(f"{work}/vm.md") if len(r) == 3 and r[0] != "implementation"}
vm_jit = vm["flowjit JIT"]
w(f"| guest fib(30), guest calls recursive: at least 2x faster than PyPy, 20x the interpreter | "
  f"{vm['PyPy'] / vm_jit:.2f}x faster than PyPy, {vm['flowjit interpreter'] / vm_jit:.1f}x the "
  f"interpreter | {verdict(vm['PyPy'] / vm_jit >= 2 and vm['flowjit interpreter'] / vm_jit >= 20)} |")
rec = []
for k in range(len(glob.glob(f"{work}/recursion*.name"))):
    res = {r["command"]: r["median"] for r in json.load(open(f"{work}/recursion{k}.json"))["results"]}
    rec.append((open(f"{work}/recursion{k}.name").read().split()[0], res["interp"] / res["jit"]))
rec_worst = min(rec, key=lambda r: r[1])
w(f"| recursive programs (`benches/recursion`) at least 5x faster than the interpreter | worst "
  f"{rec_worst[1]:.1f}x ({rec_worst[0]}) | {verdict(rec_worst[1] >= 5)} |")
w("")

w("## Executors side by side")
w("")
w(f"`flowjit bench PROGRAM INPUTS --runs {runs}`: every executor in one process, in interleaved")
w("rounds (interpreter, trace interpreter, JIT, and for bytecode the partially evaluated")
w("interpreter compiled whole), so that the machine's noise falls on them alike. Medians;")
w("in brackets, how many times faster than the interpreter. The warm-up is the JIT's time")
w("from the start of the run to its first machine code.")
w("")
w("| program | interp | trace | jit | pe+compile | JIT warm-up |")
w("| --- | ---: | ---: | ---: | ---: | ---: |")
def vs(t, i):
    s = i / t
    return f"{human(t)} ({s:.0f}x)" if s >= 10 else f"{human(t)} ({s:.2f}x)"
for name, by in bench:
    i = by["interp"]["median_s"]
    pe = by.get("pe+compile")
    warm = by["jit"].get("warmup_median_s")
    w(f"| {name} | {human(i)} | {vs(by['trace']['median_s'], i)} | {vs(by['jit']['median_s'], i)} | "
      f"{vs(pe['median_s'], i) if pe else '-'} | "
      f"{human(warm) if warm is not None else 'no machine code'} |")
w("")
w("`square.bc` is the articles' register machine (`examples/regmachine.fg`) running the")
w("square program, meta-traced through its hints: one trace, keyed by the bytecode and `pc`.")
w("`boxed.fg` and `stackvm.fg` compute what `sum.fg` computes, through boxes checked by calls")
w("and through a stack machine written in the flowgraph language.")
w("")

w("## Against peers: the register machine")
w("")
w(f"`RUNS={runs} benches/peers/run.sh`: the register machine as a plain switch interpreter in C")
w("(`regmachine.c`, gcc -O2), in Python (`regmachine.py`, CPython and PyPy) and in Lua")
w("(`regmachine.lua`, LuaJIT); `square.c` is the loop written directly in C, kept from being")
w("folded into a multiplication; `loops.c` holds the articles' direct loops. Whole processes.")
w("")
w(open(f"{work}/peers.md").read().rstrip())
w("")
w(f"The square of 10^8, where start-up weighs less (`hyperfine -N -w 2 -r {runs}`):")
w("")
w("| program | median | vs the C loop |")
w("| --- | ---: | ---: |")
base = sq8["C loop, direct (gcc -O2)"]
for name, t in sq8.items():
    w(f"| {name} | {human(t)} | {t / base:.2f}x |")
w("")
w("The Python and Lua interpreters dispatch through a chain of `if`s, as the flowgraph")
w("interpreter does; their JITs trace the dispatch loop itself, which removes much less")
w("than tracing at the meta level does.")
w("")

w(f"## Brainfuck: {bf_name}")
w("")
w(f"`RUNS={bf_runs} PEERS=\"{bf_peers}\"`")
w("`benches/peers/bf.sh`: the program translated command by command to C (`bf2c.py`,")
w("`gcc -O2`: the limit), the same translation with flowjit's representation (64-bit cells")
w("masked after each step; 16-byte tagged cells with a bounds check per access), a plain")
w("switch interpreter in C, Lua (LuaJIT) and Python (PyPy), flowjit meta-tracing")
w("`examples/bf.fg`, and `examples/bf.fg` specialized to the program by `flowjit pe` and")
w("compiled whole (the time includes specializing and compiling). Whole processes; every")
w("output is checked against the translation's.")
w("")
w(open(f"{work}/bf.md").read().rstrip())
w("")

w("## Recursion")
w("")
w(f"`RUNS={runs} benches/peers/fib.sh`: fib by double recursion (`benches/recursion/fib.fg`)")
w("in C, Lua (LuaJIT) and Python (PyPy, CPython) beside flowjit. Whole processes.")
w("")
w(open(f"{work}/fib.md").read().rstrip())
w("")
w(f"`RUNS={runs} benches/peers/vm.sh`: a stack machine whose guest calls are calls of its own")
w("dispatch function (`benches/recursion/vm.fg`) running guest fib, beside the same machine")
w("written in Python (`benches/peers/vm.py`) under PyPy. Whole processes.")
w("")
w(open(f"{work}/vm.md").read().rstrip())
w("")
w(f"The programs of `benches/recursion`, each as a whole process under `--mode interp` and")
w(f"the default `--mode jit` (`hyperfine -N -w 1 -r {runs}`):")
w("")
w("| program | interpreter | JIT | JIT's speed-up |")
w("| --- | ---: | ---: | ---: |")
for k in range(len(glob.glob(f"{work}/recursion*.name"))):
    name = open(f"{work}/recursion{k}.name").read().strip()
    res = {r["command"]: r["median"] for r in json.load(open(f"{work}/recursion{k}.json"))["results"]}
    w(f"| {name} | {human(res['interp'])} | {human(res['jit'])} | {res['interp'] / res['jit']:.1f}x |")
w("")

w("## Cliffs: where a JIT can lose to its interpreter")
w("")
w(f"`RUNS={runs} benches/cliffs/run.sh`: each program as a whole process under `--mode interp`")
w("and the default `--mode jit`, interleaved, at a short length and at one 10-20x longer.")
w("`big_acc` keeps an accumulator past 64 bits, `cross64` crosses 64 bits halfway, `cross1k`")
w("after 1,000 iterations, `bigbound` after 1,000 too, tested against a bound past 64 bits,")
w("`back64` comes back within 64 bits after 1,000, `wide8`")
w("works on eight wide integers, `promote100` promotes a value cycling through 100,")
w("`dispatch64` is a 64-way chain of tests, `alternate` alternates two loops, `loops300` is")
w("300 loops one after another and `branchy400` 400 loops of 32 branches each (`gen.py`")
w("writes the last three).")
w("")
w(open(f"{work}/cliffs.md").read().rstrip())
w("")

w("## Phases: where a run's time goes")
w("")
w(f"`flowjit ... --stats --compile-on-driver`, the median of {runs} run{'s' if runs > 1 else ''} (Cranelift compiles on the")
w("driver's thread, so compiling is on the run's clock here).")
w("")
w("| program | traces | bridges | interpreting | recording | optimizing | compiling | machine code |")
w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, med, recorded, compiled, bridges in phases:
    cells = " | ".join(f"{med[k]:.2f} ms" for k in
                       ("interpreting", "recording", "optimizing", "compiling", "machine code"))
    w(f"| {name} | {compiled} of {recorded} | {bridges} | {cells} |")
w("")

open(out, "w").write("\n".join(o))
PY
say "wrote $OUT"
