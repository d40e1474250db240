//! The `abicache` command line as a library: [`main_with_args`] parses
//! arguments and runs a command, returning the exit code.
//!
//! One implementation serves both entry points: the cargo binary
//! (`src/main.rs`) and the Python wheel's `abicache` console script, which
//! calls it through `abicache._native.cli_main`, so a `pip install` ships
//! the command without a second native build. Exit codes: 0 success, 1 a
//! failed build, 2 bad input or an ABI refusal, 3 a cache miss under
//! offline mode, with the reason on stderr.
//!
//! ```
//! // `--version` prints and succeeds; an unknown subcommand is a usage error (2).
//! assert_eq!(abicache_cli::main_with_args(["abicache", "--version"]), 0);
//! assert_eq!(abicache_cli::main_with_args(["abicache", "no-such-command"]), 2);
//! ```

#![deny(missing_docs)]

mod args;
mod commands;
mod config_cmd;
mod fleet_cmds;
mod interpreter;
mod misses_cmd;
mod output;
mod reference;
mod remote_cmds;
mod render;
mod run_cmd;

use std::ffi::OsString;
use std::path::Path;

use clap::Parser;

pub use reference::{cli_reference, CLI_REFERENCE_COMMAND, CLI_REFERENCE_PATH};

/// Runs the command line `args` (the first item is the program name) and
/// returns the process exit code. `--help` and `--version` print and return
/// 0; a usage error prints clap's message and returns 2.
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    main_with_package(args, None)
}

/// [`main_with_args`] for the Python package's entry point, which knows
/// the installed `abicache` package directory (`package_dir`): `abicache
/// run` puts its `_sitecustomize` directory first on `PYTHONPATH`. On Unix
/// a started `abicache run CMD` does not return: `CMD` replaces the process.
pub fn main_with_package<I, T>(args: I, package_dir: Option<&Path>) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match args::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() { 2 } else { 0 };
        }
    };
    // `abicache config` shows each setting and where it came from, a value
    // the other commands refuse included: it resolves nothing.
    if let args::Command::Config(args) = &cli.command {
        return exit_code(config_cmd::config(
            cli.cache_dir.clone(),
            cli.remote.as_deref(),
            args,
        ));
    }
    // Every other command: the settings, resolved and checked once, before
    // any work (a value that cannot be used is refused here, naming it).
    let offline = match &cli.command {
        args::Command::Build(build) if build.offline => Some(abicache::settings::OfflineMode::On),
        _ => None,
    };
    let flags = abicache::settings::Flags {
        cache_dir: cli.cache_dir.clone(),
        remote: cli.remote.clone(),
        offline,
    };
    let settings = match abicache::settings::Settings::resolve(&flags) {
        Ok(settings) => std::sync::Arc::new(settings),
        Err(e) => return exit_code(Err(abicache::Error::from(e).into())),
    };
    let cli = match cli.command {
        args::Command::Run(run) => {
            return run_cmd::run(run, cli.cache_dir, cli.verbose, package_dir);
        }
        command => args::Cli { command, ..cli },
    };
    exit_code(commands::run(cli, settings))
}

/// The exit code of a command's result; an error is printed on stderr first.
fn exit_code(result: anyhow::Result<()>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(err) if err.downcast_ref::<Exit>().is_some() => {
            err.downcast_ref::<Exit>().map_or(2, |exit| exit.0)
        }
        Err(err) => {
            let (code, hint) = match (
                err.downcast_ref::<abicache_fleet::Error>(),
                err.downcast_ref::<abicache::Error>(),
            ) {
                (Some(e), _) => (e.exit_code(), fleet_cmds::flag_hint(e)),
                (None, Some(e)) => (e.exit_code(), None),
                (None, None) => (2, None),
            };
            match hint {
                Some(hint) => eprintln!("error: {}; {hint}", render_error(&err)),
                None => eprintln!("error: {}", render_error(&err)),
            }
            code as u8
        }
    }
}

/// Ends the command with this exit code and nothing more on stderr: what
/// the command had to say it has already said (a closed stdout pipe is a
/// quiet 0, a prebuild whose table lists failed cells is 1). Returned as an
/// error so that nothing below [`main_with_args`] ends the process: the
/// Python console script gets the code back instead of a dead interpreter.
#[derive(Debug)]
pub(crate) struct Exit(pub(crate) u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}

impl std::error::Error for Exit {}

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
