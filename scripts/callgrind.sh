#!/usr/bin/env bash
# Instruction counts under callgrind, two builds side by side: a fixed set of programs (the
# register machine's square, mandel.b, the boxed-integer loop, the stack machine, a branchy
# loop, the cliff programs), each run with --compile-on-driver (Cranelift on the driver's
# thread, not the compiler thread, whose speed under callgrind would change the run: so the
# counts are the same from run to run), and a markdown table of before, after and change.
#
#   scripts/callgrind.sh OLD_BINARY NEW_BINARY
#   COMPILE=1 scripts/callgrind.sh OLD NEW   # count only the driver's compile path
#                                           # (--toggle-collect='flowjit::jit::compile::*')
#   ONLY=dispatch64 scripts/callgrind.sh OLD NEW
#
# mandel.b takes some minutes under callgrind; two programs run at a time.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
old="$1"; new="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cases=(
  "bytecode examples/square.bc a=1000000"
  "bf ../shared/bf/mandel.b"
  "run examples/boxed.fg n=100000"
  "run benches/cliffs/big_acc.fg n=100000"
  "run examples/stackvm.fg n=100000"
  "run tests/programs/branchy.fg n=1000000"
  "run benches/cliffs/alternate.fg n=100000"
  "run benches/cliffs/branchy400.fg m=64"
  "run benches/cliffs/cross64.fg n=100000"
  "run benches/cliffs/dispatch64.fg n=10000"
  "run benches/cliffs/loops300.fg m=60"
  "run benches/cliffs/promote100.fg n=200000"
  "run benches/cliffs/wide8.fg n=10000"
)
toggle=()
[ -n "${COMPILE:-}" ] && toggle=(--toggle-collect='flowjit::jit::compile::*')
# The total instructions of one run of `$2` with binary `$1`, into file `$3`.
count() {
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --smc-check=all "${toggle[@]}" --callgrind-out-file="$3.out" \
        "$1" $2 --compile-on-driver >/dev/null 2>&1 || true
    callgrind_annotate "$3.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}' > "$3"
}
# 1234567 as 1,234,567.
commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
printf '| program | before | after | change |\n| --- | ---: | ---: | ---: |\n'
k=0
for c in "${cases[@]}"; do
    k=$((k + 1))
    [ -n "${ONLY:-}" ] && [[ "$c" != *"$ONLY"* ]] && continue
    count "$old" "$c" "$work/old.$k" &
    count "$new" "$c" "$work/new.$k"
    wait
    a=$(cat "$work/old.$k"); b=$(cat "$work/new.$k")
    change=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.2f%%", 100 * (b - a) / a }')
    printf '| %s | %s | %s | %s |\n' "${c#* }" "$(commas "$a")" "$(commas "$b")" "$change"
done
