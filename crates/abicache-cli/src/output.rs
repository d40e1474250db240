//! Writing a command's answer to stdout: text or pretty JSON, and a closed
//! pipe ends the command quietly. Every `*_cmds` module prints through here.

use anyhow::Result;

/// Prints `value` as pretty JSON and a newline on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<()> {
    emit(&format!("{}\n", serde_json::to_string_pretty(value)?))
}

/// What a command with `--json` prints: `value` as pretty JSON when `json`,
/// else the text `human` renders.
pub(crate) fn print_json_or(
    json: bool,
    value: &impl serde::Serialize,
    human: impl FnOnce() -> String,
) -> Result<()> {
    if json {
        print_json(value)
    } else {
        emit(&human())
    }
}

/// Writes to stdout; a closed pipe (`abicache ls | head`) ends the command
/// quietly instead of panicking like `print!` does.
pub(crate) fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(crate::Exit(0).into()),
        other => Ok(other?),
    }
}
