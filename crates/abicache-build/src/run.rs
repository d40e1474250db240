//! Running a program and capturing its output, the one runner of abicache
//! (compilers, linkers, interpreter probes): a cancelled build, a time
//! limit or an output cap stops the program and every process it started,
//! and nothing is waited for.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::error::BuildError;
use crate::quote::shell_join;

/// The environment variables removed from every compiler, launcher and
/// precompiled-header build abicache starts (compiles, links, `--version`
/// and target probes): secrets those programs never need, which a launcher
/// such as distcc, sccache or a `CXX` wrapper could log, keep in a
/// long-running server or pass on.
///
/// - `ABICACHE_SIGNING_KEY`: the key uploads and bundles are signed with.
/// - `ABICACHE_REMOTE`: the remote's URL, which holds a Redis password
///   (`redis://:PASSWORD@HOST`).
/// - `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
///   `AWS_CONTAINER_AUTHORIZATION_TOKEN`: the credentials the `s3://`
///   backend (OpenDAL's S3 signer) reads from the environment. The S3
///   backend is the only cloud backend built in (no Azure or GCS), and the
///   Redis backend reads its password from the URL only. Paths to
///   credential files (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_PROFILE`) stay:
///   they are not secrets, and sccache's S3 storage can use them.
pub const SECRET_VARIABLES: &[&str] = &[
    abicache_env_vars::ABICACHE_SIGNING_KEY,
    abicache_env_vars::ABICACHE_REMOTE,
    abicache_env_vars::AWS_ACCESS_KEY_ID,
    abicache_env_vars::AWS_SECRET_ACCESS_KEY,
    "AWS_SESSION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
];

/// `command` with [`SECRET_VARIABLES`] removed from its environment.
pub(crate) fn without_secrets(command: &mut Command) -> &mut Command {
    for name in SECRET_VARIABLES {
        command.env_remove(name);
    }
    command
}

/// How long a tool has to exit after `SIGINT` before it gets `SIGKILL`.
const GRACE: Duration = Duration::from_secs(2);
/// How often a running tool is checked for exit and for cancellation.
const POLL: Duration = Duration::from_millis(10);

/// A flag that cancels a build: set it from any thread (a Ctrl-C handler)
/// and the build stops its compilers and returns [`BuildError::Cancelled`].
/// Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Sets the flag: running tools are stopped, no new one starts.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once [`Cancel::cancel`] was called on this flag or a clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl PartialEq for Cancel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Runs `argv` in `dir`, without [`SECRET_VARIABLES`] in its environment,
/// and returns its output once it exits; when `cancel`
/// is set meanwhile, the tool and its descendants get `SIGINT` (as from a
/// terminal's Ctrl-C, so compilers remove their temporary files), then
/// `SIGKILL` after [`GRACE`], and [`BuildError::Cancelled`] is returned
/// once the tool has exited.
pub(crate) fn run(argv: &[String], dir: &Path, cancel: &Cancel) -> Result<Captured, BuildError> {
    run_env(argv, dir, &[], cancel)
}

/// [`run`] with `env` added to the environment (nvcc's phases get the
/// variables nvcc assigns them, `PATH` and `LD_LIBRARY_PATH` among them).
pub(crate) fn run_env(
    argv: &[String],
    dir: &Path,
    env: &[(String, String)],
    cancel: &Cancel,
) -> Result<Captured, BuildError> {
    if cancel.is_cancelled() {
        return Err(BuildError::Cancelled);
    }
    let mut command = Command::new(&argv[0]);
    without_secrets(&mut command)
        .args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir);
    let limits = RunLimits {
        cancel: Some(cancel),
        ..RunLimits::default()
    };
    match run_captured(&mut command, limits) {
        Ok(out) => Ok(out),
        Err(RunFailure::Spawn(error)) => Err(BuildError::Spawn {
            program: argv[0].clone(),
            command: shell_join(argv),
            error,
        }),
        Err(RunFailure::Cancelled) => Err(BuildError::Cancelled),
        Err(RunFailure::Wait(e)) => Err(e.into()),
        Err(failure @ (RunFailure::TimedOut | RunFailure::Flooded { .. })) => {
            unreachable!("a run without a time limit or an output cap ended with {failure:?}")
        }
    }
}

/// What a run printed, and how it ended.
#[derive(Debug)]
pub struct Captured {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// The peak resident memory of the program and of every descendant it
    /// waited for (the largest of them, from `wait4`'s `ru_maxrss`), in
    /// bytes: a compiler driver's peak covers the `cc1plus`, `cicc` or
    /// `ptxas` it ran. `None` where the system does not say.
    pub peak_rss: Option<u64>,
}

impl Captured {
    /// Standard output then standard error, as text (what a failing tool said).
    pub fn combined(&self) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }
}

/// Why [`run_captured`] gave no answer. In every case but `Spawn` the
/// program and its descendants were stopped and the program reaped before
/// it returned.
#[derive(Debug)]
pub enum RunFailure {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// Waiting for the program failed.
    Wait(std::io::Error),
    /// [`RunLimits::cancel`] was set.
    Cancelled,
    /// It ran longer than [`RunLimits::timeout`].
    TimedOut,
    /// It printed more than [`RunLimits::cap`] bytes on `stream`.
    Flooded {
        /// `"stdout"` or `"stderr"`.
        stream: &'static str,
    },
}

/// The limits of one [`run_captured`]; the default has none.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunLimits<'a> {
    /// Stop the program when this flag is set.
    pub cancel: Option<&'a Cancel>,
    /// Stop the program when it runs longer than this.
    pub timeout: Option<Duration>,
    /// Stop the program when it prints more than this many bytes on
    /// stdout or on stderr.
    pub cap: Option<u64>,
}

/// The one way abicache runs a program and captures its output (compilers,
/// linkers, interpreter probes): `command` runs with stdin closed and
/// stdout and stderr captured, until it exits and both streams are closed,
/// or one of `limits` is hit; then it and every process it started get
/// `SIGINT`, `SIGKILL` after a 2 s grace, and it is reaped before this returns.
pub fn run_captured(command: &mut Command, limits: RunLimits<'_>) -> Result<Captured, RunFailure> {
    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let mut child = command
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
    let limit = limits.cap.map_or(u64::MAX, |cap| cap.saturating_add(1));
    for (stream, pipe) in pipes {
        let tx = tx.clone();
        // Not joined on failure: a reader ends when the stopped child's pipe closes.
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(limit).read_to_end(&mut bytes);
            }
            let _ = tx.send((stream, bytes));
        });
    }
    drop(tx);
    let (mut stdout, mut stderr, mut status) = (None, None, None);
    let mut peak_rss = None;
    let failure = 'run: loop {
        while let Ok((stream, bytes)) = rx.try_recv() {
            if limits.cap.is_some_and(|cap| bytes.len() as u64 > cap) {
                break 'run RunFailure::Flooded { stream };
            }
            match stream {
                "stdout" => stdout = Some(bytes),
                _ => stderr = Some(bytes),
            }
        }
        if status.is_none() {
            status = match try_reap(&child) {
                Ok(Some((exit, peak))) => {
                    peak_rss = peak;
                    Some(exit)
                }
                Ok(None) => None,
                Err(e) => break RunFailure::Wait(e),
            };
        }
        if let (Some(status), Some(_), Some(_)) = (status, &stdout, &stderr) {
            return Ok(Captured {
                status,
                stdout: stdout.unwrap_or_default(),
                stderr: stderr.unwrap_or_default(),
                peak_rss,
            });
        }
        if limits.cancel.is_some_and(Cancel::is_cancelled) {
            break RunFailure::Cancelled;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break RunFailure::TimedOut;
        }
        std::thread::sleep(POLL);
    };
    // A program already reaped is not signalled: its pid may be reused.
    if status.is_none() {
        stop(&mut child);
    }
    Err(failure)
}

/// Reaps `child` if it has exited (without blocking), with its exit status
/// and peak resident memory: `wait4` in place of `Child::try_wait`, which
/// does not return resource usage. `Ok(None)` while it runs. Once this
/// returned an exit status the child is reaped: `Child::wait` must not be
/// called on it (its pid may be reused).
#[allow(unsafe_code)] // `wait4` has no safe wrapper with resource usage; see the SAFETY comments
fn try_reap(child: &Child) -> std::io::Result<Option<(ExitStatus, Option<u64>)>> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes for the call;
        // `pid` is our own unreaped child.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        match reaped {
            0 => return Ok(None),
            -1 => {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            _ => {
                // Linux reports `ru_maxrss` in KiB.
                let peak = u64::try_from(usage.ru_maxrss)
                    .ok()
                    .filter(|&kib| kib > 0)
                    .map(|kib| kib * 1024);
                return Ok(Some((ExitStatus::from_raw(status), peak)));
            }
        }
    }
}

/// `SIGINT` to `child` and its descendants, `SIGKILL` to whatever is left
/// after [`GRACE`], waits (at most another [`GRACE`]) until they are gone,
/// then reaps `child`.
fn stop(child: &mut Child) {
    use rustix::process::{kill_process, Pid, Signal};
    let Some(root) = Pid::from_raw(child.id() as i32) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    // Collected first: once the tool exits its children are re-parented.
    let mut tree = descendants(root);
    tree.insert(0, root);
    for &pid in &tree {
        let _ = kill_process(pid, Signal::INT);
    }
    let all_gone = |within: Duration| {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if tree.iter().all(|&pid| !alive(pid)) {
                return true;
            }
            std::thread::sleep(POLL);
        }
        false
    };
    if !all_gone(GRACE) {
        // Background children of a shell ignore SIGINT; SIGKILL cannot be ignored.
        for &pid in &tree {
            if alive(pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        let _ = all_gone(GRACE);
    }
    let _ = child.wait();
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: rustix::process::Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())) {
        Ok(stat) => stat_fields(&stat).is_some_and(|(state, _)| state != "Z"),
        Err(_) => false,
    }
}

/// Every process below `root`, from `/proc` (Linux), parents before children.
fn descendants(root: rustix::process::Pid) -> Vec<rustix::process::Pid> {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            if let Some((_, ppid)) = stat_fields(&stat) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root.as_raw_nonzero().get()];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found
        .into_iter()
        .skip(1)
        .filter_map(rustix::process::Pid::from_raw)
        .collect()
}

/// The state and parent pid of a `/proc/PID/stat` line (the command name,
/// in parentheses, may itself contain spaces and parentheses).
fn stat_fields(stat: &str) -> Option<(&str, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_run_stops_the_tool_and_its_children_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        // A "compiler" that starts a child and waits, like a driver running cc1plus.
        let script = format!(
            "sleep 60 & echo $! > {p}; echo $$ >> {p}; wait",
            p = pids.display()
        );
        let argv: Vec<String> = ["sh", "-c", &script]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let cancel = Cancel::new();
        let canceller = {
            let cancel = cancel.clone();
            let pids = pids.clone();
            std::thread::spawn(move || {
                while std::fs::read_to_string(&pids).map_or(0, |t| t.lines().count()) < 2 {
                    std::thread::sleep(Duration::from_millis(10));
                }
                cancel.cancel();
            })
        };
        let started = Instant::now();
        let result = run(&argv, dir.path(), &cancel);
        canceller.join().unwrap();
        assert!(matches!(result, Err(BuildError::Cancelled)), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        for pid in std::fs::read_to_string(&pids).unwrap().lines() {
            let pid = Pid::from_raw(pid.parse().unwrap()).unwrap();
            assert!(!alive(pid), "process {pid:?} survived the cancel");
        }
    }

    #[test]
    fn a_run_past_its_time_limit_or_over_its_output_cap_is_stopped_and_says_which() {
        let mut sleeper = Command::new("sh");
        sleeper.args(["-c", "echo started; exec sleep 60"]);
        let limits = RunLimits {
            timeout: Some(Duration::from_millis(200)),
            ..RunLimits::default()
        };
        let result = run_captured(&mut sleeper, limits);
        assert!(matches!(result, Err(RunFailure::TimedOut)), "{result:?}");

        let mut flood = Command::new("sh");
        flood.args(["-c", "while :; do echo flood >&2; done"]);
        let limits = RunLimits {
            cap: Some(4096),
            ..RunLimits::default()
        };
        let result = run_captured(&mut flood, limits);
        assert!(
            matches!(result, Err(RunFailure::Flooded { stream: "stderr" })),
            "{result:?}"
        );

        let mut fine = Command::new("sh");
        fine.args(["-c", "echo out; echo err >&2; exit 3"]);
        let out = run_captured(&mut fine, RunLimits::default()).unwrap();
        assert_eq!(
            (out.status.code(), &out.stdout[..], &out.stderr[..]),
            (Some(3), &b"out\n"[..], &b"err\n"[..])
        );
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(stat_fields("12 (a) b)) S 7 12 12"), Some(("S", 7)));
        assert_eq!(stat_fields("garbage"), None);
    }

    use rustix::process::Pid;
}
