//! The `flowjit` binary.

use std::ffi::{c_int, c_long};

/// mimalloc: the optimizer and Cranelift allocate and free many small vectors and maps for
/// every trace they compile, which glibc's allocator made a tenth of the work. Its version 2
/// (the crate's `v2`): version 3 took half a millisecond more to start a process (1.8 ms
/// against 1.3 ms for `flowjit --version`), and compiled no faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's options (its `mimalloc.h`; the crate's bindings do not name the one needed).
unsafe extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
}

/// `mi_option_purge_delay` in mimalloc 2's `mi_option_e`: how long freed memory stays with
/// the process before it is given back to the system, in milliseconds (10), or -1: never.
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// Freed memory is kept, not given back: the next allocation finds it mapped. Given back
/// after 10 ms (mimalloc's default), it was taken again a little later and every page of it
/// faulted and was zeroed anew by the kernel (2 MiB at a time under transparent huge
/// pages): `flowjit pe --compile --run` of mandel.b frees what partial evaluation used, and
/// Cranelift then allocated as much again, for a tenth of the run's time. A
/// `MIMALLOC_PURGE_DELAY` in the environment is left as it is (the option then differs
/// from the default, 10).
fn keep_freed_memory() {
    // SAFETY: mimalloc's own functions, called before any other thread exists.
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) == 10 {
            mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

fn main() -> std::process::ExitCode {
    keep_freed_memory();
    flowjit::cli::main()
}
