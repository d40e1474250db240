//! Cache writes that run beside the caller: a first key's scan leaves the
//! stat cache and the key memo to write (stamping the directories it looked
//! in, merging its lookups, serializing ~3000 entries), which costs about a
//! quarter of the scan itself. [`Session::prepare`] returns the key as soon
//! as it is known and hands those writes to a thread of their own; they
//! overlap the lookup, the load or the build that follows.
//!
//! Nothing waits on them for correctness: both caches are written whole
//! and atomically, a reader that finds the old file only scans again, and
//! what a write records is checked against the moment its scan started (the
//! racy rule), never against when the write runs. A session still waits for
//! its writes before reading what they write ([`Session::settle`], called by
//! [`Session::prepare`], [`Session::key`] and the warm-load record) and when
//! it is dropped, so a CLI command or a Python call never exits with a
//! write half done.

use std::sync::Mutex;
use std::thread::JoinHandle;

use super::Session;

/// The writes a session started and has not waited for.
#[derive(Debug, Default)]
pub(super) struct WriteBehind {
    pending: Mutex<Vec<JoinHandle<()>>>,
}

impl WriteBehind {
    /// Runs `write` on a thread of its own; where no thread can be started,
    /// here and now.
    pub(super) fn spawn(&self, write: impl FnOnce() + Send + 'static) {
        // `Builder::spawn` consumes the closure even when it fails: keep it
        // reachable so a failed spawn still writes, inline.
        let slot = std::sync::Arc::new(Mutex::new(Some(write)));
        let theirs = std::sync::Arc::clone(&slot);
        let started = std::thread::Builder::new()
            .name("abicache-cache-write".to_owned())
            .spawn(move || take(&theirs).into_iter().for_each(|write| write()));
        match started {
            Ok(handle) => lock(&self.pending).push(handle),
            Err(_) => take(&slot).into_iter().for_each(|write| write()),
        }
    }

    /// Waits until every write started so far has finished. A write that
    /// panicked only lost its speed-up: the panic is not passed on.
    pub(super) fn settle(&self) {
        let pending = std::mem::take(&mut *lock(&self.pending));
        for handle in pending {
            let _ = handle.join();
        }
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        self.settle();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn take<F>(slot: &Mutex<Option<F>>) -> Option<F> {
    lock(slot).take()
}

impl Session {
    /// Waits for the cache writes this session started in the background
    /// (the stat cache and key memo of each first key, see the module
    /// documentation). Returns at once when there are none. Dropping the
    /// session waits too.
    pub fn settle(&self) {
        self.writes.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn settle_and_drop_wait_for_every_write() {
        let done = Arc::new(AtomicUsize::new(0));
        let writes = WriteBehind::default();
        for _ in 0..3 {
            let done = Arc::clone(&done);
            writes.spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        writes.settle();
        assert_eq!(done.load(Ordering::SeqCst), 3);
        let later = Arc::clone(&done);
        writes.spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            later.fetch_add(1, Ordering::SeqCst);
        });
        drop(writes);
        assert_eq!(done.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_panicking_write_does_not_reach_the_caller() {
        let writes = WriteBehind::default();
        writes.spawn(|| panic!("a failed write"));
        writes.settle();
    }
}
