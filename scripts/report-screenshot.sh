#!/usr/bin/env bash
# The screenshot of `flowjit report` in README.md and docs/ARCHITECTURE.md: the register
# machine's square program, trace 0 shown and one instruction selected, rendered by the
# same headless Chromium as tests/report.rs (Debian's `chromium`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
out=$(mktemp -d)
target/release/flowjit report examples/square.bc a=1000 -o "$out/square.html" >/dev/null
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1500,1500 \
    --user-data-dir="$out/profile" --screenshot=docs/report.png \
    "file://$out/square.html#t0/0.0.10" 2>/dev/null
rm -rf "$out"
echo "docs/report.png"
