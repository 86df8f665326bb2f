#!/usr/bin/env bash
# Builds flowjit's tests for aarch64-unknown-linux-gnu and runs them under qemu-aarch64, so
# that the aarch64 machine code the JIT emits is executed, not only displayed.
#
#   scripts/aarch64-test.sh            # the test suite, as `cargo test --workspace`, but
#                                      # for two tests of what does not depend on the ISA
#                                      # (below)
#   scripts/aarch64-test.sh --test opt # any other cargo test arguments
#   scripts/aarch64-test.sh --install  # only install what is needed (exit 1 if it cannot)
#
# It installs what it needs (qemu-user, the aarch64 cross gcc and libc, and the Rust
# target). The suites that start the `flowjit` binary as a process start it through
# FLOWJIT_TEST_RUNNER (tests/common/mod.rs), which this script sets to qemu-aarch64, so they
# need no binfmt_misc (which containers often lack). Doc tests are not cross-compiled.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
[ -d /usr/aarch64-linux-gnu/lib ] || missing+=(libc6-dev-arm64-cross)
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    sudo_=""
    [ "$(id -u)" = 0 ] || sudo_=sudo
    $sudo_ apt-get update -q >&2 || true
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q "${missing[@]}" >&2
fi
rustup target list --installed | grep -q '^aarch64-unknown-linux-gnu$' || rustup target add aarch64-unknown-linux-gnu
if [ "${1:-}" = --install ]; then
    exit 0
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar

export FLOWJIT_TEST_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
# Under qemu an unoptimized build is slow twice over: the tests and the binary they start
# are built with opt-level 1 (debug assertions and overflow checks stay on, as in the
# native run). The whole aarch64 suite then ran in 7 minutes once built, where its
# tests/programs.rs alone had taken some 40 minutes at opt-level 0, one process at a time.
export CARGO_PROFILE_DEV_OPT_LEVEL=1

if (($#)); then
    cargo test --target aarch64-unknown-linux-gnu "$@"
else
    # Under qemu everything runs about ten times slower. Two tests of tests/programs.rs check
    # what is the same on every ISA (every example read in the Prolog syntax, and every
    # program through the partial evaluator with nothing static, which the x86_64 run
    # checks): they are left out here, so that the test of every program in every mode,
    # machine code included, has both cores.
    cargo test --target aarch64-unknown-linux-gnu --workspace -- \
        --skip every_example_prints_the_same_in_the_prolog_syntax \
        --skip every_program_partially_evaluated_with_nothing_static_prints_the_same
fi
