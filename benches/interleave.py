#!/usr/bin/env python3
"""Whole processes timed in turn, round after round, so that a busy machine slows each of
them alike: the medians (and fastest runs) of each command.

    python3 benches/interleave.py ROUNDS NAME=COMMAND [NAME=COMMAND ...]
    python3 benches/interleave.py 9 \\
        "interp=target/release/flowjit run benches/cliffs/branchy400.fg m=20000 --mode interp" \\
        "jit=target/release/flowjit run benches/cliffs/branchy400.fg m=20000"

Each command runs through the shell, its output discarded; a command that fails stops
the run.
"""
import statistics
import subprocess
import sys
import time


def main() -> int:
    if len(sys.argv) < 3 or "=" not in "".join(sys.argv[2:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rounds = int(sys.argv[1])
    cmds = [arg.split("=", 1) for arg in sys.argv[2:]]
    times = {name: [] for name, _ in cmds}
    for _ in range(rounds):
        for name, cmd in cmds:
            start = time.perf_counter()
            subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - start)
    first = statistics.median(times[cmds[0][0]])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:10} median {med * 1e3:9.1f} ms  fastest {min(ts) * 1e3:9.1f} ms"
              f"  {med / first:5.2f}x the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
