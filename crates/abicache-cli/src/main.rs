//! `abicache`: build, cache and reuse ABI-compatible PyTorch extensions.
//!
//! The command line lives in the `abicache_cli` library (shared with the
//! Python wheel's console script); this binary only calls it.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(abicache_cli::main_with_args(std::env::args_os()))
}
