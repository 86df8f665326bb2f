//! The `flowjit` binary.

fn main() -> std::process::ExitCode {
    flowjit::cli::main()
}
