//! The bounds on background precompiled-header work, with real `g++` on small headers
//! (the `torch/extension.h`-sized case is in `benches/bench_pch.py`): a PCH only for a
//! header and flag set a second build needed, one compile at a time per cache and at most
//! `ABICACHE_PCH_JOBS` per machine, a byte cap that evicts the least recently used, and
//! the counters `abicache stats` shows.
//!
//! These drive the policy functions a build calls ([`abicache::pch::resolve`] after the
//! lookup, [`abicache::pch::start_missing`] after publishing) with hand-made requests, so
//! the umbrella header can be a few lines instead of torch's. The compiler is `g++` behind
//! a gate script that waits for a file to exist, so a test decides when a compile ends.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abicache::build::PchRequest;
use abicache::pch::{resolve, start_missing, PchStart};
use abicache::store::{MachineSlots, PchLookup, PchSkip, Store};

/// A checkout with `include/small/umbrella.h`, and a gated `g++`.
struct Setup {
    t: tempfile::TempDir,
    root: PathBuf,
    compiler: PathBuf,
    gate: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ext");
        std::fs::create_dir_all(root.join("include/small")).unwrap();
        std::fs::write(
            root.join("include/small/umbrella.h"),
            "#pragma once\nstruct Small { int x; };\ninline int small() { return 1; }\n",
        )
        .unwrap();
        let gate = t.path().join("gate");
        let compiler = t.path().join("gated-g++");
        std::fs::write(
            &compiler,
            format!(
                "#!/bin/sh\nwhile [ ! -e '{}' ]; do sleep 0.05; done\nexec g++ \"$@\"\n",
                gate.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&compiler, std::fs::Permissions::from_mode(0o755)).unwrap();
        Setup {
            t,
            root,
            compiler,
            gate,
        }
    }

    /// A store at `name` under the test's directory.
    fn store(&self, name: &str) -> Store {
        Store::open(self.t.path().join(name))
            .unwrap()
            .with_pch_max_size(None)
            .with_max_size(None)
    }

    /// The machine's PCH slots, private to this test.
    fn slots(&self, jobs: u32) -> MachineSlots {
        MachineSlots {
            dir: self.t.path().join("run/pch-slots"),
            jobs,
        }
    }

    /// The PCH request of a plan compiled with `-DFLAVOUR=<flavour>` (a new flag set).
    fn request(&self, flavour: &str) -> PchRequest {
        PchRequest {
            key: blake3::hash(flavour.as_bytes()).to_hex().to_string(),
            header: "small/umbrella.h".into(),
            compiler: self.compiler.clone(),
            flags: vec![
                "-std=c++17".into(),
                "-Iinclude".into(),
                format!("-DFLAVOUR={flavour}"),
            ],
            unkeyed_flags: vec![],
            dir: self.root.clone(),
            units: vec!["src/a.cpp".into()],
        }
    }

    fn open_gate(&self) {
        std::fs::write(&self.gate, "").unwrap();
    }
}

/// One build that compiled `src/a.cpp` and had no PCH for `request`: what it started.
fn build_needing(store: &Store, request: &PchRequest, slots: &MachineSlots) -> PchStart {
    let mut warnings = Vec::new();
    let plan = resolve(store, vec![request.clone()], &mut warnings);
    assert!(plan.ready.is_empty(), "already built");
    let out = start_missing(
        store,
        &plan.missing,
        &["src/a.cpp".to_string()],
        slots,
        &mut warnings,
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    match out.as_slice() {
        [(key, start)] if *key == request.key => *start,
        [] => panic!(
            "not missing: {:?}",
            store.pch_lookup(&request.key, &request.dir)
        ),
        other => panic!("{other:?}"),
    }
}

/// Waits until `request`'s background build has ended (its lock free, a directory
/// published), then adopts it; returns its directory.
fn wait_ready(store: &Store, request: &PchRequest) -> PathBuf {
    let started = Instant::now();
    loop {
        let paths = store.pch_paths(&request.key).unwrap();
        assert!(
            !paths.failed_dir.exists(),
            "failed: {}",
            std::fs::read_to_string(paths.failed_dir.join("abicache-pch.log")).unwrap_or_default()
        );
        if paths.dir.is_dir() && !lock_held(&paths.lock) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "background PCH build hung"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut warnings = Vec::new();
    let plan = resolve(store, vec![request.clone()], &mut warnings);
    assert!(warnings.is_empty(), "{warnings:?}");
    match plan.ready.as_slice() {
        [ready] => ready.dir.clone(),
        _ => panic!(
            "not ready: {:?}",
            store.pch_lookup(&request.key, &request.dir)
        ),
    }
}

/// True while some process holds the `flock` on `path`.
fn lock_held(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// PCH builds in progress in `store`: the PCH locks (`v1/locks/pch-<key>.lock`) held.
fn builds_in_progress(store: &Store) -> usize {
    std::fs::read_dir(store.layout().locks_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("pch-") && name != "pch-build.lock" && lock_held(&e.path())
        })
        .count()
}

/// Issue 30: several small extensions with different flags started four ~1 GB PCH
/// compiles at once on a 2-core machine. Now a flag set used once starts none, the second
/// need of one starts it, and a second new flag set needed while it compiles is skipped as
/// busy: at most one PCH compile at a time per cache.
#[test]
fn two_extensions_with_new_flag_sets_start_at_most_one_pch_compile_at_a_time_and_a_flag_set_used_once_starts_none(
) {
    let s = Setup::new();
    let store = s.store("cache");
    let slots = s.slots(4); // the machine allows more: the cache's own bound is tested
    let (o2, o3) = (s.request("o2"), s.request("o3"));

    // Each flag set used once: recorded, nothing started.
    assert_eq!(
        build_needing(&store, &o2, &slots),
        PchStart::Skipped(PchSkip::FirstUse)
    );
    assert_eq!(
        build_needing(&store, &o3, &slots),
        PchStart::Skipped(PchSkip::FirstUse)
    );
    assert_eq!(builds_in_progress(&store), 0);
    assert!(!store.pch_root().join(&o2.key).exists());

    // The second need of `o2` starts it; `o3`'s second need while it compiles does not.
    assert_eq!(build_needing(&store, &o2, &slots), PchStart::Started);
    assert_eq!(
        build_needing(&store, &o3, &slots),
        PchStart::Skipped(PchSkip::Busy)
    );
    assert_eq!(builds_in_progress(&store), 1);
    assert!(matches!(
        store.pch_lookup(&o2.key, &o2.dir).unwrap(),
        PchLookup::Busy
    ));
    s.open_gate();
    let dir = wait_ready(&store, &o2);
    assert!(dir.join("abicache-pch.h.gch").is_file());
    assert_eq!(builds_in_progress(&store), 0);
    assert_eq!(
        std::fs::read_dir(store.layout().tmp_dir()).unwrap().count(),
        0,
        "nothing left half-written"
    );

    // Once it is done, the next need of `o3` starts it.
    assert_eq!(build_needing(&store, &o3, &slots), PchStart::Started);
    wait_ready(&store, &o3);

    let c = store.counters().unwrap();
    assert_eq!(
        (
            c.pch_builds_started,
            c.pch_builds_finished,
            c.pch_skipped_first_use,
            c.pch_skipped_busy,
            c.pch_skipped_machine_slots,
            c.pch_skipped_over_cap,
            c.pch_evicted,
        ),
        (2, 2, 2, 1, 0, 0, 0)
    );
}

/// `ABICACHE_PCH_JOBS` bounds PCH compiles across caches: with one slot, a second cache's
/// PCH waits for the first cache's compile; with two, both run.
#[test]
fn machine_slots_bound_pch_compiles_across_caches() {
    let s = Setup::new();
    let (one, two) = (s.store("cache-1"), s.store("cache-2"));
    let (a, b) = (s.request("a"), s.request("b"));
    let single = s.slots(1);
    for (store, request) in [(&one, &a), (&two, &b)] {
        assert_eq!(
            build_needing(store, request, &single),
            PchStart::Skipped(PchSkip::FirstUse)
        );
    }
    assert_eq!(build_needing(&one, &a, &single), PchStart::Started);
    assert_eq!(
        build_needing(&two, &b, &single),
        PchStart::Skipped(PchSkip::MachineSlotsFull)
    );
    assert_eq!(build_needing(&two, &b, &s.slots(2)), PchStart::Started);
    assert_eq!(builds_in_progress(&one) + builds_in_progress(&two), 2);
    s.open_gate();
    wait_ready(&one, &a);
    wait_ready(&two, &b);
    let c = two.counters().unwrap();
    assert_eq!(
        (
            c.pch_skipped_first_use,
            c.pch_skipped_machine_slots,
            c.pch_builds_started,
            c.pch_builds_finished
        ),
        (1, 1, 1, 1)
    );
}

/// Builds `request`'s PCH through two needs, waits for it, returns its size in bytes.
fn build_pch(store: &Store, request: &PchRequest, slots: &MachineSlots) -> u64 {
    build_needing(store, request, slots);
    assert_eq!(build_needing(store, request, slots), PchStart::Started);
    let dir = wait_ready(store, request);
    // Distinct last-use times, whatever the clock's resolution.
    std::thread::sleep(Duration::from_millis(20));
    dir_size(&dir)
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// The PCH bytes of a cache are capped: a new PCH evicts the least recently used, and
/// one larger than the cap on its own is removed and not rebuilt.
#[test]
fn the_pch_cap_evicts_the_least_recently_used_first() {
    let s = Setup::new();
    s.open_gate();
    let slots = s.slots(1);
    let store = s.store("cache");
    let (old, used, new) = (s.request("old"), s.request("used"), s.request("new"));
    let size = build_pch(&store, &old, &slots);
    build_pch(&store, &used, &slots);
    // `used` is used again: now `old` is the least recently used.
    wait_ready(&store, &used);
    std::thread::sleep(Duration::from_millis(20));

    // Room for two and a half of them: adopting a third evicts exactly one, `old`.
    let capped = Store::open(store.root())
        .unwrap()
        .with_pch_max_size(Some(size * 5 / 2));
    assert_eq!(capped.pch_max_size(), size * 5 / 2);
    build_pch(&capped, &new, &slots);
    assert!(
        !capped.pch_root().join(&old.key).exists(),
        "the oldest went"
    );
    assert!(capped.pch_root().join(&used.key).is_dir());
    assert!(capped.pch_root().join(&new.key).is_dir());
    assert_eq!(capped.counters().unwrap().pch_evicted, 1);

    // A cap smaller than one PCH: the new one is removed when adopted, and never started
    // again while the cap stays that small.
    let tiny = Store::open(store.root())
        .unwrap()
        .with_pch_max_size(Some(size / 2));
    let big = s.request("big");
    build_needing(&tiny, &big, &slots);
    assert_eq!(build_needing(&tiny, &big, &slots), PchStart::Started);
    let started = Instant::now();
    while lock_held(&tiny.pch_paths(&big.key).unwrap().lock)
        || !tiny.pch_root().join(&big.key).is_dir()
    {
        assert!(started.elapsed() < Duration::from_secs(120), "hung");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut warnings = Vec::new();
    let plan = resolve(&tiny, vec![big.clone()], &mut warnings);
    assert!(plan.ready.is_empty() && plan.missing.is_empty(), "{plan:?}");
    assert!(!tiny.pch_root().join(&big.key).exists());
    assert_eq!(
        build_needing(&tiny, &big, &slots),
        PchStart::Skipped(PchSkip::OverCap)
    );
    let c = tiny.counters().unwrap();
    assert_eq!((c.pch_builds_finished, c.pch_skipped_over_cap), (4, 1));
    // Everything else went too: the total is under the tiny cap.
    assert!(tiny.stats().unwrap().pch_bytes <= size / 2);
}

/// The default cap is a quarter of the cache's size limit, and `ABICACHE_PCH_MAX_SIZE`'s
/// setting overrides it.
#[test]
fn the_pch_cap_defaults_to_a_quarter_of_the_size_limit() {
    let s = Setup::new();
    let store = s.store("cache").with_max_size(Some(8 << 30));
    assert_eq!(store.pch_max_size(), 2 << 30);
    let store = store.with_max_size(None);
    assert_eq!(store.pch_max_size(), abicache::store::DEFAULT_PCH_MAX_SIZE);
    let store = store.with_pch_max_size(Some(123));
    assert_eq!(store.pch_max_size(), 123);
}
