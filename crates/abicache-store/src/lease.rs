//! Leases: the exclusion of a shared cache, which needs no lock that holds
//! across nodes.
//!
//! A lease is a file (`v1/leases/<key>.lease`, `v1/leases/gc.lease`) that
//! names its holder (host, boot id, pid namespace, pid, start time and a
//! token unique to this acquisition). Rules:
//! - **Taking**: created with `O_EXCL` (atomic at the server on NFSv3+ and
//!   every other filesystem abicache calls shared), then its content
//!   written and fsynced. Exactly one creator succeeds.
//! - **Holding**: a thread refreshes the file's mtime (`futimens` with
//!   `UTIME_NOW`, so a server that sets times uses its own clock) every
//!   quarter of the lease timeout while the holder lives, after checking the
//!   file still carries its token (otherwise the lease was taken over: the
//!   holder is told by [`Lease::lost`] and stops refreshing).
//! - **Fresh or stale**: a lease is stale when its mtime, read through a
//!   fresh `open` + `fstat` (which revalidates attribute caches on NFS's
//!   close-to-open rule), is older than the lease timeout plus
//!   [`CLOCK_SKEW_ALLOWANCE`]; or at once when its holder is on this host
//!   (same hostname, boot id and pid namespace) and its pid is dead (today's
//!   dead-pid rule). A waiter waits while it is fresh.
//! - **Takeover, exactly one winner**: for a stale lease of generation `G`
//!   (its token), a waiter creates `<lease>.takeover.G` with `O_EXCL`; only
//!   one per generation succeeds. The winner re-reads the lease: still `G`
//!   and still stale, it writes its own lease privately
//!   (`<lease>.new.<token>`) and renames it over the lease (an atomic
//!   replace); a lease that is now fresh makes it remove the marker and wait
//!   again; one that is gone or another generation sends it back to the
//!   start. Markers stay for [`MARKER_AGE`] past the lease timeout (so a
//!   waiter with an old view of `G` cannot win `G` again), then gc removes them.
//! - **A dead node's lease** never blocks longer than the timeout plus the
//!   skew allowance (plus one poll).
//! - **Release**: the holder stops refreshing and removes the lease if it
//!   still carries its token.
//!
//! Assumed of the filesystem: `O_EXCL` create and rename within a directory
//! are atomic at the server; mtimes are set by one clock per file (the
//! server's, or clients whose clocks agree within the allowance).

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Result, StoreError};
use crate::host::{pid_is_dead, HostId};
use crate::manifest::unix_now;

/// How far apart the clocks of the nodes (and the file server) may be: a
/// lease is stale only once unrefreshed for its timeout plus this.
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(2);

/// Takeover markers and abandoned private lease files are removed by gc once
/// older than the lease timeout plus this.
pub const MARKER_AGE: Duration = Duration::from_secs(120);

/// The shortest lease timeout used (a smaller setting is raised to it), so
/// a holder can refresh in time.
const MIN_TIMEOUT: Duration = Duration::from_millis(200);

/// Who holds a lease, as its file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's hostname.
    pub host: String,
    /// The holder's boot id.
    pub boot_id: String,
    /// The holder's pid namespace.
    pub pid_namespace: String,
    /// The holder's pid (in its namespace).
    pub pid: u32,
    /// When it took the lease (Unix seconds).
    pub since: u64,
    /// The token of this acquisition (unique per acquisition).
    pub token: String,
}

impl LeaseHolder {
    /// The content of a lease file for this holder.
    pub fn to_text(&self) -> String {
        format!(
            "host={}\nboot_id={}\npid_namespace={}\npid={}\nsince={}\ntoken={}\n",
            self.host, self.boot_id, self.pid_namespace, self.pid, self.since, self.token
        )
    }

    /// Parses a lease file's content; missing fields stay empty or zero.
    pub fn parse(text: &str) -> LeaseHolder {
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .unwrap_or_default()
                .to_owned()
        };
        LeaseHolder {
            host: field("host"),
            boot_id: field("boot_id"),
            pid_namespace: field("pid_namespace"),
            pid: field("pid").parse().unwrap_or(0),
            since: field("since").parse().unwrap_or(0),
            token: field("token"),
        }
    }

    /// A new holder: this process, now, with a fresh token.
    fn this_process() -> LeaseHolder {
        let host = HostId::current();
        LeaseHolder {
            host: host.hostname.clone(),
            boot_id: host.boot_id.clone(),
            pid_namespace: host.pid_namespace.clone(),
            pid: std::process::id(),
            since: unix_now(),
            token: unique_token(),
        }
    }

    /// True when the holder is a process of this host's pid namespace that
    /// no longer exists.
    fn is_dead_here(&self) -> bool {
        let here = HostId::current();
        self.pid != 0
            && self.host == here.hostname
            && self.boot_id == here.boot_id
            && self.pid_namespace == here.pid_namespace
            && pid_is_dead(self.pid)
    }

    /// In words, for errors and progress lines.
    pub fn describe(&self) -> String {
        if self.pid == 0 {
            return "a process that has not written its lease yet".to_owned();
        }
        format!(
            "pid {} on host `{}` (boot {}) for {}s",
            self.pid,
            self.host,
            self.boot_id.get(..8).unwrap_or(&self.boot_id),
            unix_now().saturating_sub(self.since)
        )
    }
}

/// A lease as a waiter sees it.
#[derive(Clone, Debug)]
pub struct ObservedLease {
    /// What its file says.
    pub holder: LeaseHolder,
    /// Its generation: the token, or (while its content is not written
    /// yet) the inode number.
    pub generation: String,
    /// How long since it was created or last refreshed (by the file's mtime).
    pub age: Duration,
}

impl ObservedLease {
    /// Reads the lease at `path` through a fresh descriptor; `None` when
    /// there is none.
    pub fn read(path: &Path) -> Result<Option<ObservedLease>> {
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(StoreError::opening("read lease", path, e)),
        };
        let meta = match file.metadata() {
            Ok(meta) => meta,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(StoreError::io_at("inspect lease", path)(e)),
        };
        if !meta.is_file() {
            return Err(StoreError::Squatted {
                path: path.to_owned(),
                kind: "special file",
            });
        }
        let mut text = String::new();
        match (&mut file).take(4096).read_to_string(&mut text) {
            Ok(_) => {}
            Err(e) if is_gone(&e) => return Ok(None),
            Err(_) => text.clear(),
        }
        let holder = LeaseHolder::parse(&text);
        let generation = if holder.token.is_empty() {
            format!("ino{}", meta.ino())
        } else {
            holder.token.clone()
        };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let age = SystemTime::now()
            .duration_since(modified)
            .unwrap_or_default();
        Ok(Some(ObservedLease {
            holder,
            generation,
            age,
        }))
    }

    /// True when the lease may be taken over (see the module's rules).
    pub fn is_stale(&self, timeout: Duration) -> bool {
        self.age > effective(timeout) + CLOCK_SKEW_ALLOWANCE || self.holder.is_dead_here()
    }
}

/// A held lease; refreshed by a thread until dropped, then removed.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    holder: LeaseHolder,
    lost: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    refresher: Option<std::thread::JoinHandle<()>>,
}

/// What one attempt at a lease found.
#[derive(Debug)]
pub enum Attempt {
    /// This process holds it now.
    Taken(Lease),
    /// Another process holds it (fresh, or being taken over by another waiter).
    Held(LeaseHolder),
}

impl Lease {
    /// One attempt: create the lease, or take over a stale one (see the
    /// module's rules). Never waits.
    pub fn try_acquire(path: &Path, timeout: Duration) -> Result<Attempt> {
        loop {
            let holder = LeaseHolder::this_process();
            match create_with(path, &holder) {
                Ok(()) => return Ok(Attempt::Taken(Lease::hold(path, holder, timeout))),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::opening("create lease", path, e)),
            }
            let Some(seen) = ObservedLease::read(path)? else {
                continue; // released meanwhile: try to create it again
            };
            if !seen.is_stale(timeout) {
                return Ok(Attempt::Held(seen.holder));
            }
            let marker = marker_path(path, "takeover", &seen.generation);
            match create_with(&marker, &holder) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Ok(Attempt::Held(seen.holder)); // another waiter is taking over
                }
                Err(e) => return Err(StoreError::opening("create takeover marker", &marker, e)),
            }
            match ObservedLease::read(path)? {
                Some(again) if again.generation == seen.generation => {
                    if !again.is_stale(timeout) {
                        // Refreshed after all: its holder lives; let a later takeover happen.
                        let _ = std::fs::remove_file(&marker);
                        return Ok(Attempt::Held(again.holder));
                    }
                }
                // Released or replaced meanwhile: start over (the marker stays, see MARKER_AGE).
                _ => continue,
            }
            let private = marker_path(path, "new", &holder.token);
            create_with(&private, &holder)
                .map_err(|e| StoreError::opening("write lease", &private, e))?;
            if let Err(e) = std::fs::rename(&private, path) {
                let _ = std::fs::remove_file(&private);
                return Err(StoreError::io_at("take over lease", path)(e));
            }
            return Ok(Attempt::Taken(Lease::hold(path, holder, timeout)));
        }
    }

    /// Takes the lease, waiting (polling with backoff) while another
    /// process holds a fresh one, for at most `wait_limit`; a time-out is
    /// [`StoreError::LockTimeout`] naming `what`, the lease and its holder.
    pub fn acquire(
        path: &Path,
        what: &str,
        timeout: Duration,
        wait_limit: Duration,
    ) -> Result<Lease> {
        let start = Instant::now();
        let mut sleep = Duration::from_millis(5);
        let max_sleep = (effective(timeout) / 4).min(Duration::from_millis(250));
        loop {
            let holder = match Self::try_acquire(path, timeout)? {
                Attempt::Taken(lease) => return Ok(lease),
                Attempt::Held(holder) => holder,
            };
            let waited = start.elapsed();
            if waited >= wait_limit {
                return Err(StoreError::LockTimeout {
                    key: what.to_owned(),
                    path: path.to_owned(),
                    timeout: wait_limit,
                    holder: holder.describe(),
                });
            }
            std::thread::sleep(sleep.min(wait_limit - waited));
            sleep = (sleep * 2).min(max_sleep);
        }
    }

    /// The lease file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This acquisition's holder record (its token is unique).
    pub fn holder(&self) -> &LeaseHolder {
        &self.holder
    }

    /// True once a refresh found the lease taken over by another process
    /// (this one was too slow to refresh it: suspended, or cut off).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    fn hold(path: &Path, holder: LeaseHolder, timeout: Duration) -> Lease {
        let lost = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = mpsc::channel::<()>();
        let interval = effective(timeout) / 4;
        let (thread_path, token, thread_lost) =
            (path.to_owned(), holder.token.clone(), Arc::clone(&lost));
        let refresher = std::thread::Builder::new()
            .name("abicache-lease".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    if !refresh(&thread_path, &token) {
                        thread_lost.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            })
            .ok();
        Lease {
            path: path.to_owned(),
            holder,
            lost,
            stop: Some(stop),
            refresher,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.refresher.take() {
            let _ = thread.join();
        }
        if ObservedLease::read(&self.path)
            .ok()
            .flatten()
            .is_some_and(|seen| seen.generation == self.holder.token)
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Sets the lease's mtime to now when it still carries `token`; false when
/// it does not (taken over, or removed).
fn refresh(path: &Path, token: &str) -> bool {
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let mut text = String::new();
    let _ = (&mut file).take(4096).read_to_string(&mut text);
    if LeaseHolder::parse(&text).token != token {
        return false;
    }
    crate::private_file::set_times_now(&file).is_ok()
}

/// Creates `path` with `O_EXCL`, owner-only, and writes and fsyncs `holder` into it.
///
/// A create that loses the race at the server is `AlreadyExists`, also where
/// the filesystem reports it as `EPERM` (sshfs does, for SFTP's failed
/// exclusive open): an `EPERM` after which `path` exists is taken as a lost
/// race; one after which it does not is returned as it is.
fn create_with(path: &Path, holder: &LeaseHolder) -> std::io::Result<()> {
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    let mut file = match opened {
        Err(e)
            if e.kind() == std::io::ErrorKind::PermissionDenied
                && path.symlink_metadata().is_ok() =>
        {
            return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, e));
        }
        other => other?,
    };
    file.write_all(holder.to_text().as_bytes())?;
    file.sync_all()
}

/// `<lease>.<kind>.<id>` next to the lease.
fn marker_path(lease: &Path, kind: &str, id: &str) -> PathBuf {
    let mut name = lease.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{kind}.{id}"));
    lease.with_file_name(name)
}

/// Removes the takeover markers and abandoned private lease files in
/// `dir` older than the lease timeout plus [`MARKER_AGE`]; returns how many.
pub(crate) fn sweep_markers(dir: &Path, timeout: Duration) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let limit = effective(timeout) + CLOCK_SKEW_ALLOWANCE + MARKER_AGE;
    let mut removed = 0;
    for entry in rd.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.contains(".lease.takeover.") || name.contains(".lease.new.")) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() > limit);
        if old && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The lease timeout actually used (at least [`MIN_TIMEOUT`]).
fn effective(timeout: Duration) -> Duration {
    timeout.max(MIN_TIMEOUT)
}

/// A file vanished or went stale under us (a half-visible shared file).
pub(crate) fn is_gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESTALE)
}

/// A token no other acquisition on any host produces: host tag, pid, time
/// and a counter.
fn unique_token() -> String {
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}-{}-{nanos}-{n}",
        HostId::current().file_tag(),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foreign(token: &str) -> LeaseHolder {
        LeaseHolder {
            host: "node-b".into(),
            boot_id: "ffffffff-0000-0000-0000-000000000000".into(),
            pid_namespace: "pid:[1]".into(),
            pid: 4242,
            since: unix_now(),
            token: token.into(),
        }
    }

    fn age(path: &Path, by: Duration) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - by)
            .unwrap();
    }

    #[test]
    fn a_lease_is_exclusive_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lease");
        let Attempt::Taken(lease) = Lease::try_acquire(&path, Duration::from_secs(60)).unwrap()
        else {
            panic!("a free lease is taken");
        };
        let seen = ObservedLease::read(&path).unwrap().unwrap();
        assert_eq!(seen.holder, *lease.holder());
        assert!(matches!(
            Lease::try_acquire(&path, Duration::from_secs(60)).unwrap(),
            Attempt::Held(h) if h.token == lease.holder().token
        ));
        drop(lease);
        assert!(!path.exists());
    }

    #[test]
    fn a_fresh_foreign_lease_is_waited_for_and_a_stale_one_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lease");
        create_with(&path, &foreign("T1")).unwrap();
        let timeout = Duration::from_secs(1);
        assert!(matches!(
            Lease::try_acquire(&path, timeout).unwrap(),
            Attempt::Held(h) if h.host == "node-b"
        ));
        let err = Lease::acquire(&path, "k", timeout, Duration::from_millis(300)).unwrap_err();
        assert!(err.to_string().contains("node-b"), "{err}");
        age(
            &path,
            timeout + CLOCK_SKEW_ALLOWANCE + Duration::from_secs(1),
        );
        let Attempt::Taken(lease) = Lease::try_acquire(&path, timeout).unwrap() else {
            panic!("a stale lease is taken over");
        };
        assert!(marker_path(&path, "takeover", "T1").exists());
        assert_eq!(
            ObservedLease::read(&path).unwrap().unwrap().holder.token,
            lease.holder().token
        );
    }

    #[test]
    fn a_held_lease_is_refreshed_and_notices_a_takeover() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lease");
        let timeout = Duration::from_millis(400);
        let Attempt::Taken(lease) = Lease::try_acquire(&path, timeout).unwrap() else {
            panic!()
        };
        age(&path, Duration::from_secs(100));
        std::thread::sleep(Duration::from_millis(250));
        assert!(ObservedLease::read(&path).unwrap().unwrap().age < Duration::from_secs(1));
        // Someone replaces it: the holder notices and no longer refreshes it.
        std::fs::write(&path, foreign("other").to_text()).unwrap();
        std::thread::sleep(Duration::from_millis(250));
        assert!(lease.lost());
        drop(lease);
        assert!(
            path.exists(),
            "a lost lease is not removed by its old holder"
        );
    }

    #[test]
    fn a_dead_pid_of_this_host_is_stale_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lease");
        let mut dead = LeaseHolder::this_process();
        dead.pid = u32::try_from(i32::MAX).unwrap() - 1;
        create_with(&path, &dead).unwrap();
        assert!(matches!(
            Lease::try_acquire(&path, Duration::from_secs(600)).unwrap(),
            Attempt::Taken(_)
        ));
    }

    #[test]
    fn old_markers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("k.lease.takeover.T");
        std::fs::write(&marker, "").unwrap();
        assert_eq!(sweep_markers(dir.path(), Duration::from_secs(1)), 0);
        age(&marker, Duration::from_secs(3600));
        assert_eq!(sweep_markers(dir.path(), Duration::from_secs(1)), 1);
    }
}
