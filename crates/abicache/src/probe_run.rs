//! Running an interpreter for the probe with a time limit and an output cap,
//! so a `--python` that never exits or floods its output fails with a clear
//! error instead of hanging or exhausting memory.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a bounded run printed, and how it ended.
pub(crate) struct Captured {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a bounded run gave no answer.
pub(crate) enum RunFailure {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// It ran longer than the time limit; it was killed.
    TimedOut,
    /// It printed more than the cap on `stream`; it was killed.
    Flooded { stream: &'static str },
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) for at most
/// `timeout`, keeping at most `cap` bytes of each stream. A child that is
/// still running at the limit, or prints more than `cap`, is killed and
/// reaped before this returns.
pub(crate) fn run_bounded(
    cmd: &mut Command,
    timeout: Duration,
    cap: u64,
) -> Result<Captured, RunFailure> {
    let deadline = Instant::now() + timeout;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunFailure::Spawn)?;
    let (tx, rx) = mpsc::channel();
    let pipes: [(&'static str, Option<Box<dyn Read + Send>>); 2] = [
        ("stdout", child.stdout.take().map(|p| Box::new(p) as _)),
        ("stderr", child.stderr.take().map(|p| Box::new(p) as _)),
    ];
    for (stream, pipe) in pipes {
        let tx = tx.clone();
        // Not joined on failure: a reader ends when the killed child's pipe closes.
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(cap + 1).read_to_end(&mut bytes);
            }
            let _ = tx.send((stream, bytes));
        });
    }
    drop(tx);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((stream, bytes)) = rx.recv_timeout(left) else {
            return Err(kill(child, RunFailure::TimedOut));
        };
        if bytes.len() as u64 > cap {
            return Err(kill(child, RunFailure::Flooded { stream }));
        }
        match stream {
            "stdout" => stdout = bytes,
            _ => stderr = bytes,
        }
    }
    // Both pipes are closed; the child is exiting (or detached them).
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Ok(Captured {
                    status,
                    stdout,
                    stderr,
                })
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => return Err(kill(child, RunFailure::TimedOut)),
        }
    }
}

fn kill(mut child: Child, why: RunFailure) -> RunFailure {
    let _ = child.kill();
    let _ = child.wait();
    why
}
