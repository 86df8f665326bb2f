#!/usr/bin/env bash
# The cliff programs: where a JIT can lose to its own interpreter. Each program runs as a
# whole process under --mode interp and --mode jit, interleaved (hyperfine, medians), at
# a short length and at lengths 10-20x longer (the last, the long run); the table gives
# jit / interp.
#
#   benches/cliffs/run.sh                # every program, 5 runs each
#   RUNS=3 ONLY=dispatch64 benches/cliffs/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
RUNS="${RUNS:-5}"
bin="$root/target/release/flowjit"
[ -x "$bin" ] || (cd "$root" && cargo build --release -q)
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# name, program, then each run's inputs, the long run's last
cases=(
  "big_acc|big_acc.fg|n=1000000|n=10000000"
  "cross64|cross64.fg|n=2000000|n=20000000"
  "cross1k|cross1k.fg|n=1000000|n=10000000"
  "bigbound|bigbound.fg|n=1000000|n=10000000"
  "back64|back64.fg|n=1000000|n=10000000"
  "wide8|wide8.fg|n=1000000|n=10000000"
  "promote100|promote100.fg|n=500000|n=5000000"
  "dispatch64|dispatch64.fg|n=200000|n=2000000"
  "alternate|alternate.fg|n=1000000|n=10000000"
  "loops300|loops300.fg|m=60|m=1200|m=20000"
  "branchy400|branchy400.fg|m=1000|m=20000"
)
printf '| program | inputs | interp | jit | jit / interp |\n| --- | --- | ---: | ---: | ---: |\n'
for c in "${cases[@]}"; do
  IFS='|' read -r name file runs <<<"$c"
  [ -n "${ONLY:-}" ] && [ "$ONLY" != "$name" ] && continue
  IFS='|' read -r -a runs <<<"$runs"
  for inputs in "${runs[@]}"; do
    json="$work/$name.json"
    hyperfine -N -w 1 -r "$RUNS" --export-json "$json" \
      -n interp "$bin run $here/$file $inputs --mode interp" \
      -n jit "$bin run $here/$file $inputs" >/dev/null 2>&1
    python3 - "$json" "$name" "$inputs" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
i, j = r["interp"], r["jit"]
fmt = lambda s: f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {fmt(i)} | {fmt(j)} | {j / i:.2f}x |")
PY
  done
done
