//! Running a compiler or linker so that a build can be cancelled: the tool
//! and every process it started are stopped, and nothing is waited for.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BuildError;
use crate::quote::shell_join;

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

/// Runs `argv` in `dir` and returns its output once it exits; when `cancel`
/// is set meanwhile, the tool and its descendants get `SIGINT` (as from a
/// terminal's Ctrl-C, so compilers remove their temporary files), then
/// `SIGKILL` after [`GRACE`], and [`BuildError::Cancelled`] is returned
/// once the tool has exited.
pub(crate) fn run(argv: &[String], dir: &Path, cancel: &Cancel) -> Result<Output, BuildError> {
    if cancel.is_cancelled() {
        return Err(BuildError::Cancelled);
    }
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| BuildError::Spawn {
            program: argv[0].clone(),
            command: shell_join(argv),
            error,
        })?;
    let stdout = child.stdout.take().map(read_all);
    let stderr = child.stderr.take().map(read_all);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if cancel.is_cancelled() {
            stop(&mut child);
            return Err(BuildError::Cancelled);
        }
        std::thread::sleep(POLL);
    };
    let collect = |reader: Option<std::thread::JoinHandle<Vec<u8>>>| {
        reader.and_then(|r| r.join().ok()).unwrap_or_default()
    };
    Ok(Output {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    })
}

fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
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
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(stat_fields("12 (a) b)) S 7 12 12"), Some(("S", 7)));
        assert_eq!(stat_fields("garbage"), None);
    }

    use rustix::process::Pid;
}
