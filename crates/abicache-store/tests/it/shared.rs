//! Shared mode (`ABICACHE_SHARED=on`) on a local directory, with real
//! processes: leases written as another host, takeover by exactly one
//! racer, per-host counter logs, half-visible entries, gc's lease. The test
//! binary re-executes itself running only the ignored `child` test, whose
//! role is in `ABICACHE_TEST_ROLE`; it reports lines starting `RESULT `.
//! (The two-node test bed, with FUSE mounts and namespaces, is elsewhere.)

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use abicache_store::{
    CacheMode, Claim, Event, LeaseHolder, Manifest, ObservedLease, Store, StoreError,
    CLOCK_SKEW_ALLOWANCE,
};
use common::*;

const ROLE: &str = "ABICACHE_TEST_ROLE";
const ROOT: &str = "ABICACHE_TEST_ROOT";
const KEY: &str = "ABICACHE_TEST_KEY";
/// The lease timeout every child runs with (seconds): small, so tests run fast.
const LEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// The child side. Does nothing unless started by `spawn`.
#[test]
#[ignore = "run only as a child process by the other tests in this file"]
fn child() {
    let (Ok(role), Ok(root), Ok(key)) =
        (std::env::var(ROLE), std::env::var(ROOT), std::env::var(KEY))
    else {
        return;
    };
    let store = Store::open(&root).unwrap();
    assert!(store.mode().shared, "{:?}", store.mode());
    let start = Instant::now();
    match role.as_str() {
        "contend" => match store.lookup_or_lock(&key).unwrap() {
            Claim::Hit { hit, .. } => {
                store
                    .record(Event::Hit {
                        compile_seconds: 0.0,
                    })
                    .unwrap();
                println!(
                    "RESULT hit {} after {:.3}",
                    hit.manifest.library_blake3,
                    start.elapsed().as_secs_f64()
                );
            }
            Claim::Build { guard, .. } => {
                store.record(Event::Miss).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                let body = format!("built by pid {}", std::process::id());
                std::fs::write(guard.temp_dir().join("libc.so"), body).unwrap();
                let published = guard
                    .publish("libc.so", Manifest::new(&key, "c", "payload"))
                    .unwrap();
                store.record(Event::Build { seconds: 0.3 }).unwrap();
                println!(
                    "RESULT built {} after {:.3}",
                    published.hit.manifest.library_blake3,
                    start.elapsed().as_secs_f64()
                );
            }
        },
        "stats" => {
            for _ in 0..40 {
                store
                    .record(Event::Hit {
                        compile_seconds: 0.5,
                    })
                    .unwrap();
                store.record(Event::Miss).unwrap();
            }
            println!("RESULT done");
        }
        "gc-hold" => {
            let _claim = store.begin_build(&key).unwrap(); // a build in flight
            let path = store.root().join("v1/leases/gc.lease");
            let _gc =
                abicache_store::Lease::acquire(&path, "gc", LEASE_TIMEOUT, LEASE_TIMEOUT).unwrap();
            println!("RESULT holding");
            std::thread::sleep(Duration::from_secs(120));
        }
        other => panic!("unknown role {other}"),
    }
}

fn command(role: &str, root: &Path, key: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "shared::child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(ROLE, role)
    .env(ROOT, root)
    .env(KEY, key)
    .env("ABICACHE_SHARED", "on")
    .env(
        "ABICACHE_LEASE_TIMEOUT",
        LEASE_TIMEOUT.as_secs().to_string(),
    )
    .env("ABICACHE_LOCK_TIMEOUT", "60")
    .env_remove("ABICACHE_MAX_SIZE")
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    cmd
}

fn spawn(role: &str, root: &Path, key: &str) -> Child {
    command(role, root, key).spawn().unwrap()
}

/// Waits for the child, checks it succeeded, and returns its `RESULT ` lines.
fn results(child: Child) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "child failed: {:?}", out.status);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT ").map(str::to_owned))
        .collect()
}

/// The store at a fresh root, in shared mode with the children's lease timeout.
fn shared_store() -> (tempfile::TempDir, Store) {
    let (dir, store) = temp_store();
    let store = store
        .with_mode(CacheMode::forced_shared())
        .with_lease_timeout(LEASE_TIMEOUT);
    (dir, store)
}

/// Writes a lease for `key` as a process of another host, `age` old.
fn foreign_lease(store: &Store, key: &str, token: &str, age: Duration) -> std::path::PathBuf {
    let path = store.lease_path(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let holder = LeaseHolder {
        host: "node-b".into(),
        boot_id: "b0000000-0000-0000-0000-000000000000".into(),
        pid_namespace: "pid:[1]".into(),
        pid: 7,
        since: 0,
        token: token.into(),
    };
    std::fs::write(&path, holder.to_text()).unwrap();
    set_age(&path, age);
    path
}

fn set_age(path: &Path, age: Duration) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

fn seconds_after(outcome: &str) -> f64 {
    outcome.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_stale_lease_of_another_host_is_taken_over_by_exactly_one_of_eight_racers() {
    let (_t, store) = shared_store();
    let k = key("stale-foreign");
    let lease = foreign_lease(&store, &k, "T-dead", Duration::from_secs(3600));
    let children: Vec<Child> = (0..8).map(|_| spawn("contend", store.root(), &k)).collect();
    let outcomes: Vec<String> = children.into_iter().flat_map(results).collect();
    assert_eq!(outcomes.len(), 8, "{outcomes:?}");
    let built = outcomes.iter().filter(|o| o.starts_with("built ")).count();
    assert_eq!(
        built, 1,
        "exactly one process takes over and builds: {outcomes:?}"
    );
    let hashes: std::collections::BTreeSet<&str> = outcomes
        .iter()
        .map(|o| o.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(hashes.len(), 1, "all load the same entry: {outcomes:?}");
    let markers: Vec<String> = dir_names(lease.parent().unwrap())
        .into_iter()
        .filter(|n| n.contains(".takeover."))
        .collect();
    assert_eq!(markers, [format!("{k}.lease.takeover.T-dead")]);
    assert!(
        !lease.exists(),
        "the winner released the lease it took over"
    );
    let c = store.counters().unwrap();
    assert_eq!((c.builds, c.misses, c.hits), (1, 1, 7));
}

#[test]
fn a_fresh_lease_of_another_host_makes_the_builder_wait_until_it_goes_stale() {
    let (_t, store) = shared_store();
    let k = key("fresh-foreign");
    let lease = foreign_lease(&store, &k, "T-alive", Duration::ZERO);
    let started = Instant::now();
    let child = spawn("contend", store.root(), &k);
    // "Node B" refreshes its lease for 2 s, then dies.
    let refreshed_for = Duration::from_secs(2);
    while started.elapsed() < refreshed_for {
        set_age(&lease, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(100));
    }
    let outcome = results(child).pop().unwrap();
    assert!(outcome.starts_with("built "), "{outcome}");
    let took = seconds_after(&outcome);
    let earliest = (refreshed_for + LEASE_TIMEOUT + CLOCK_SKEW_ALLOWANCE).as_secs_f64() - 0.3;
    let latest = earliest + 4.0;
    assert!(
        (earliest..latest).contains(&took),
        "built after {took:.2}s: it must wait while the lease is fresh and take over \
         within the timeout and the skew allowance after the last refresh ({earliest:.1}..{latest:.1}s)"
    );
}

#[test]
fn per_host_counter_logs_sum_exactly() {
    let (_t, store) = shared_store();
    let children: Vec<Child> = (0..4)
        .map(|_| spawn("stats", store.root(), &key("s")))
        .collect();
    for child in children {
        assert_eq!(results(child), ["done"]);
    }
    // Another host's log, written as its processes write theirs.
    let other = store.root().join("v1/stats/node-b-b0000000.log");
    let mut text = String::from("{\"log\":\"node-b-log\"}\n");
    for _ in 0..7 {
        text.push_str(
            &serde_json::to_string(&Event::Hit {
                compile_seconds: 1.0,
            })
            .unwrap(),
        );
        text.push('\n');
    }
    std::fs::write(&other, text).unwrap();
    let logs = dir_names(&store.root().join("v1/stats"));
    assert_eq!(logs.len(), 2, "one log per host: {logs:?}");
    let c = store.counters().unwrap();
    assert_eq!((c.hits, c.misses), (4 * 40 + 7, 4 * 40));
    assert!((c.saved_seconds - (4.0 * 40.0 * 0.5 + 7.0)).abs() < 1e-9);
    assert!(
        !store.layout().stats_log_path().exists(),
        "no shared O_APPEND log"
    );
    let stats = store.stats().unwrap();
    assert!(stats.mode.shared);
    assert_eq!(stats.mode.reason, "shared: ABICACHE_SHARED=on");
    store.zero_counters().unwrap();
    assert_eq!(
        store.counters().unwrap(),
        abicache_store::Counters::default()
    );
}

#[test]
fn zeroing_a_fresh_shared_cache_works_before_any_count() {
    let (_t, store) = shared_store();
    store.zero_counters().unwrap();
    store.record(Event::Miss).unwrap();
    assert_eq!(store.counters().unwrap().misses, 1);
}

#[test]
fn a_half_visible_entry_is_a_miss_in_shared_mode_and_never_deleted() {
    let (_t, store) = shared_store();
    let k = key("half-visible");
    let hit = publish(&store, &k, "h", b"library bytes");
    std::fs::rename(&hit.library, hit.dir.join("elsewhere")).unwrap();
    let looked = store.lookup(&k).unwrap();
    assert!(looked.hit.is_none());
    assert!(looked.warnings.is_empty(), "{:?}", looked.warnings);
    assert!(
        hit.dir.join(abicache_store::MANIFEST_FILE).exists(),
        "not deleted"
    );
    // A short library (a read racing a replacement) is a miss too.
    std::fs::write(&hit.library, b"short").unwrap();
    assert!(store.lookup(&k).unwrap().hit.is_none());
    assert!(hit.dir.exists());
    // Whole again: a hit.
    std::fs::remove_file(&hit.library).unwrap();
    std::fs::rename(hit.dir.join("elsewhere"), &hit.library).unwrap();
    assert!(store.lookup(&k).unwrap().hit.is_some());
    // The same missing library in local mode is corruption, removed as today.
    let local = store.clone().with_mode(CacheMode::local());
    std::fs::remove_file(&hit.library).unwrap();
    let looked = local.lookup(&k).unwrap();
    assert!(looked.hit.is_none());
    assert!(looked.warnings[0].removed);
    assert!(!hit.dir.exists());
}

#[test]
fn a_library_replaced_in_place_is_never_served_in_shared_mode() {
    let (_t, store) = shared_store();
    let k = key("replaced");
    let hit = publish(&store, &k, "r", b"original bytes");
    std::thread::sleep(abicache_fs::RACY_WINDOW + Duration::from_millis(50));
    assert!(store.lookup(&k).unwrap().hit.unwrap().rehashed);
    assert!(
        store.hit_recipe(&k).is_none(),
        "no warm recipe trusts stamps"
    );
    // Same path, same size, new content, as another node would write it.
    let staged = hit.dir.join("staged");
    std::fs::write(&staged, b"tampered bytes").unwrap();
    std::fs::rename(&staged, &hit.library).unwrap();
    let looked = store.lookup(&k).unwrap();
    assert!(looked.hit.is_none(), "its hash is checked on every hit");
    assert!(looked.warnings.iter().any(|w| w.removed));
}

#[test]
fn gc_takes_a_cache_wide_lease_so_a_second_gc_waits_its_turn() {
    let (_t, store) = shared_store();
    let mut holder = spawn("gc-hold", store.root(), &key("building"));
    let line = {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(holder.stdout.as_mut().unwrap()).lines();
        lines
            .find(|l| l.as_ref().map_or(true, |l| l.starts_with("RESULT ")))
            .expect("the holder reports")
            .unwrap()
    };
    assert_eq!(line.trim(), "RESULT holding");
    let err = store.gc(0).unwrap_err();
    assert!(matches!(err, StoreError::GcBusy { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("pid {}", holder.id())),
        "{err}"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The dead holder's pid is dead on this host: its lease is stale at once.
    let report = store.gc(0).unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
}

#[test]
fn shared_gc_spares_what_any_node_used_within_the_lease_timeout() {
    let (_t, store) = shared_store();
    let k = key("recent");
    let hit = publish(&store, &k, "u", b"in use elsewhere");
    // gc's own grace is zero here; in shared mode the lease timeout (plus skew) applies.
    let report = store.gc(0).unwrap();
    assert!(report.evicted.is_empty(), "{report:?}");
    assert!(hit.dir.exists());
    set_age(
        &hit.dir.join(abicache_store::LAST_USED_FILE),
        LEASE_TIMEOUT + CLOCK_SKEW_ALLOWANCE + Duration::from_secs(5),
    );
    set_age(
        &hit.dir.join(abicache_store::MANIFEST_FILE),
        Duration::from_secs(3600),
    );
    let report = store.gc(0).unwrap();
    assert_eq!(report.evicted.len(), 1, "{report:?}");
    assert!(!hit.dir.exists());
}

#[test]
fn a_lease_is_observed_with_its_holder() {
    let (_t, store) = shared_store();
    let k = key("observed");
    let lease = foreign_lease(&store, &k, "T-seen", Duration::from_secs(10));
    let seen = ObservedLease::read(&lease).unwrap().unwrap();
    assert_eq!(seen.holder.host, "node-b");
    assert_eq!(seen.generation, "T-seen");
    assert!(seen.is_stale(LEASE_TIMEOUT));
    assert!(!seen.is_stale(Duration::from_secs(60)));
}
