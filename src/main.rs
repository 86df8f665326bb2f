//! The `flowjit` binary.

/// mimalloc: the optimizer and Cranelift allocate and free many small vectors and maps for
/// every trace they compile, which glibc's allocator made a tenth of the work. Its version 2
/// (the crate's `v2`): version 3 took half a millisecond more to start a process (1.8 ms
/// against 1.3 ms for `flowjit --version`), and compiled no faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    flowjit::cli::main()
}
