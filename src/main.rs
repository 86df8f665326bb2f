//! The `flowjit` binary.

/// mimalloc: the optimizer and Cranelift allocate and free many small vectors and maps for
/// every trace they compile, which glibc's allocator made a tenth of the work.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    flowjit::cli::main()
}
