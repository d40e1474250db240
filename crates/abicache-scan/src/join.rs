//! Two pieces of work at once, for the scan's optional parallelism (a
//! warm key's checks, the cache writes after a first key).

use std::panic;
use std::sync::{Mutex, PoisonError};

/// Runs `beside` on a second thread while `here` runs on this one and
/// returns both results, as running one after the other would. When no
/// thread can be started, both run here (`here` first). A panic in
/// either reaches the caller once both have finished.
pub(crate) fn join<A, B>(beside: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B)
where
    A: Send,
{
    // Shared rather than moved, so a closure no thread took is still here.
    let waiting = Mutex::new(Some(beside));
    let take = || {
        waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    };
    std::thread::scope(|s| {
        let thread = std::thread::Builder::new().spawn_scoped(s, move || take().map(|f| f()));
        let here = here();
        let beside = match thread {
            Ok(handle) => handle.join().unwrap_or_else(|p| panic::resume_unwind(p)),
            Err(_) => None,
        };
        let beside = beside
            .or_else(|| take().map(|f| f()))
            .expect("`beside` runs on one thread or the other");
        (beside, here)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_results_come_back_and_beside_runs_on_another_thread() {
        let caller = std::thread::current().id();
        let (beside, here) = join(|| std::thread::current().id(), || 7);
        assert_eq!(here, 7);
        assert_ne!(beside, caller, "a second thread could be started here");
    }

    #[test]
    fn a_panic_beside_reaches_the_caller_after_here_finished() {
        let finished = std::sync::atomic::AtomicBool::new(false);
        let caught = panic::catch_unwind(panic::AssertUnwindSafe(|| {
            join(
                || panic!("beside failed"),
                || finished.store(true, std::sync::atomic::Ordering::SeqCst),
            )
        }));
        assert!(caught.is_err());
        assert!(finished.load(std::sync::atomic::Ordering::SeqCst));
    }
}
