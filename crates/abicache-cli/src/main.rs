//! `abicache`: build, cache and reuse ABI-compatible PyTorch extensions.
//!
//! Argument parsing and printing only; the work is done by the `abicache`
//! façade crate. Exit codes: 0 success, 1 a failed build, 2 bad input or an
//! ABI refusal, with the reason on stderr.

mod args;
mod commands;
mod fleet_cmds;
mod remote_cmds;
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
            eprintln!("error: {}", render_error(&err));
            ExitCode::from(code as u8)
        }
    }
}

/// The error and its causes joined with `: `, leaving out a cause whose
/// text the message already contains (many errors quote their source, and
/// printing the chain again repeated it: `…(os error 2). Check …: No such
/// file or directory (os error 2)`).
fn render_error(err: &anyhow::Error) -> String {
    let mut message = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}
