//! `abicache`: build, cache and reuse ABI-compatible PyTorch extensions.
//!
//! Argument parsing and printing only; the work is done by the `abicache`
//! façade crate. Exit codes: 0 success, 1 a failed build, 2 bad input or an
//! ABI refusal, with the reason on stderr.

mod args;
mod commands;
mod render;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = match err.downcast_ref::<abicache::Error>() {
                Some(e) => e.exit_code(),
                None => 2,
            };
            eprintln!("error: {err:#}");
            ExitCode::from(code as u8)
        }
    }
}
