//! Real processes contending on one store. The test binary re-executes
//! itself running only the ignored `child` test, whose role is given in
//! `ABICACHE_TEST_ROLE`; it reports on stdout lines starting with `RESULT `.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use abicache_store::{Claim, Event, Manifest, Store, StoreError};
use common::*;

const ROLE: &str = "ABICACHE_TEST_ROLE";
const ROOT: &str = "ABICACHE_TEST_ROOT";
const KEY: &str = "ABICACHE_TEST_KEY";
/// How many times each `sources` child stores generated sources.
const SOURCES_STORES: usize = 150;

/// The child side. Does nothing unless started by `spawn_child`.
#[test]
#[ignore = "run only as a child process by the other tests in this file"]
fn child() {
    let (Ok(role), Ok(root), Ok(key)) =
        (std::env::var(ROLE), std::env::var(ROOT), std::env::var(KEY))
    else {
        return;
    };
    if role == "open-default" {
        match Store::open_default() {
            Ok(store) => println!("RESULT ok {}", store.root().display()),
            Err(e) => println!("RESULT error {e}"),
        }
        return;
    }
    let store = Store::open(&root).unwrap();
    match role.as_str() {
        // lookup_or_lock; the one that builds takes its time so the others pile up on the lock.
        "contend" => match store.lookup_or_lock(&key).unwrap() {
            Claim::Hit { hit, .. } => {
                store
                    .record(Event::Hit {
                        compile_seconds: hit.manifest.compile_seconds,
                    })
                    .unwrap();
                println!("RESULT hit {}", hit.manifest.library_blake3);
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
                println!("RESULT built {}", published.hit.manifest.library_blake3);
            }
        },
        // Take the lock, leave something in the build dir, report, and wait to be killed.
        "hold" => {
            let guard = store.begin_build(&key).unwrap();
            std::fs::write(guard.temp_dir().join("half.o"), b"partial").unwrap();
            println!("RESULT holding {}", guard.temp_dir().display());
            std::thread::sleep(Duration::from_secs(120));
        }
        "stats" => {
            for _ in 0..25 {
                store
                    .record(Event::Hit {
                        compile_seconds: 1.0,
                    })
                    .unwrap();
                store.record(Event::Miss).unwrap();
            }
            println!("RESULT done");
        }
        // Open the store and store generated sources, many times: half the sets
        // shared by every process (the same `load_inline` on every rank), half
        // this process's own. Reports how many calls failed and the first error.
        "sources" => {
            let (mut failures, mut first) = (0, None);
            for i in 0..SOURCES_STORES {
                let own = format!("int f_{}_{i}();", std::process::id());
                let shared = format!("int shared_{}();", i / 2);
                let text = if i % 2 == 0 { shared } else { own };
                let files = [abicache_store::GeneratedFile {
                    name: "main.cpp",
                    contents: text.as_bytes(),
                }];
                let stored = Store::open(&root).and_then(|s| s.store_generated_sources(&files));
                match stored {
                    Ok(dir)
                        if std::fs::read(dir.join("main.cpp"))
                            .is_ok_and(|b| b == text.as_bytes()) => {}
                    Ok(dir) => {
                        failures += 1;
                        first.get_or_insert(format!("{} does not hold the set", dir.display()));
                    }
                    Err(e) => {
                        failures += 1;
                        first.get_or_insert(e.to_string());
                    }
                }
            }
            println!("RESULT failures {failures} first {first:?}");
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn_child(role: &str, root: &Path, key: &str) -> Child {
    child_command(role, root, key).spawn().unwrap()
}

fn child_command(role: &str, root: &Path, key: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "processes::child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(ROLE, role)
    .env(ROOT, root)
    .env(KEY, key)
    .env("ABICACHE_LOCK_TIMEOUT", "60")
    .env_remove("ABICACHE_MAX_SIZE")
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    cmd
}

/// Reads the child's stdout until its first `RESULT ` line.
fn first_result(child: &mut Child) -> String {
    let out = child.stdout.as_mut().unwrap();
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "child exited without a RESULT line"
        );
        if let Some(rest) = line.strip_prefix("RESULT ") {
            return rest.trim().to_owned();
        }
    }
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

#[test]
fn eight_processes_contending_on_one_key_build_it_exactly_once() {
    let (_t, store) = temp_store();
    let k = key("contended");
    let children: Vec<Child> = (0..8)
        .map(|_| spawn_child("contend", store.root(), &k))
        .collect();
    let outcomes: Vec<String> = children.into_iter().flat_map(results).collect();
    assert_eq!(outcomes.len(), 8, "{outcomes:?}");
    let built = outcomes.iter().filter(|o| o.starts_with("built ")).count();
    assert_eq!(built, 1, "exactly one process builds: {outcomes:?}");
    let hashes: std::collections::BTreeSet<&str> = outcomes
        .iter()
        .map(|o| o.split_once(' ').unwrap().1)
        .collect();
    assert_eq!(hashes.len(), 1, "all see the same entry: {outcomes:?}");
    let hit = store.lookup(&k).unwrap().hit.unwrap();
    assert_eq!(
        hashes.into_iter().next().unwrap(),
        hit.manifest.library_blake3
    );
    assert!(std::fs::read_to_string(&hit.library)
        .unwrap()
        .starts_with("built by pid "));
    let c = store.counters().unwrap();
    assert_eq!((c.builds, c.misses, c.hits), (1, 1, 7));
    assert!(dir_names(&store.layout().tmp_dir()).is_empty());
}

/// Each process opening the store used to remove the others' half-written
/// generated sources (their temp name looked like a key's leftover build
/// directory whose lock was free), so a third of concurrent cold
/// `load_inline` calls failed.
#[test]
fn concurrent_processes_storing_generated_sources_never_remove_each_others_temp_dirs() {
    let (_t, store) = temp_store();
    let children: Vec<Child> = (0..8)
        .map(|_| spawn_child("sources", store.root(), "unused"))
        .collect();
    for c in children {
        assert_eq!(results(c), ["failures 0 first None"]);
    }
    // The sets, not the `<digest>.used` markers beside the ones found in place.
    let sets = dir_names(&store.layout().version_dir().join("sources"));
    let sets: Vec<_> = sets.iter().filter(|n| !n.ends_with(".used")).collect();
    assert_eq!(sets.len(), SOURCES_STORES / 2 + 8 * SOURCES_STORES / 2);
}

#[test]
fn sigkilled_lock_holder_releases_the_lock_and_its_temp_dir_is_cleaned() {
    let (_t, store) = temp_store();
    let k = key("killed");
    let mut child = spawn_child("hold", store.root(), &k);
    let temp = first_result(&mut child);
    let temp = temp.strip_prefix("holding ").unwrap();
    assert!(Path::new(temp).join("half.o").exists());
    // While it lives, the lock is held and its build dir survives a cleanup.
    assert!(matches!(
        store
            .clone()
            .with_lock_timeout(Duration::ZERO)
            .begin_build(&k)
            .unwrap_err(),
        StoreError::LockTimeout { .. }
    ));
    assert_eq!(store.clean_stale_temp_dirs(), 0);
    child.kill().unwrap(); // SIGKILL: no destructors run.
    child.wait().unwrap();
    assert!(
        Path::new(temp).exists(),
        "a killed build leaves its directory"
    );
    // The kernel released the lock: the next builder acquires it at once.
    let reopened = open(store.root());
    assert!(
        !Path::new(temp).exists(),
        "open removes the dead build's directory"
    );
    let start = Instant::now();
    let guard = reopened.begin_build(&k).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "waited {:?}",
        start.elapsed()
    );
    std::fs::write(guard.temp_dir().join("lib.so"), b"rebuilt").unwrap();
    let _ = guard
        .publish("lib.so", Manifest::new(&k, "k", "p"))
        .unwrap();
    assert_eq!(
        std::fs::read(reopened.lookup(&k).unwrap().hit.unwrap().library).unwrap(),
        b"rebuilt"
    );
}

#[test]
fn lock_timeout_names_the_holder_pid_and_the_fix() {
    let (_t, store) = temp_store();
    let k = key("timeout");
    let mut child = spawn_child("hold", store.root(), &k);
    first_result(&mut child);
    let start = Instant::now();
    let err = store
        .clone()
        .with_lock_timeout(Duration::from_millis(300))
        .begin_build(&k)
        .unwrap_err();
    let waited = start.elapsed();
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("held by pid {pid} on host")),
        "{text}"
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let text = text
        .replace(&store.root().display().to_string(), "[ROOT]")
        .replace(&k, "[KEY]")
        .replace(&format!("pid {pid} "), "pid [PID] ")
        .replace(&format!("`{}`", host.trim()), "`[HOST]`");
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r" for \d+s;", " for [N]s;");
    settings.bind(|| insta::assert_snapshot!(text));
}

#[test]
fn stats_counters_add_up_across_concurrent_processes() {
    let (_t, store) = temp_store();
    let children: Vec<Child> = (0..4)
        .map(|_| spawn_child("stats", store.root(), "unused"))
        .collect();
    for c in children {
        assert_eq!(results(c), ["done"]);
    }
    let s = store.stats().unwrap().counters;
    assert_eq!((s.hits, s.misses, s.saved_seconds), (100, 100, 100.0));
}

#[test]
fn open_default_reads_the_root_and_settings_from_the_process_environment() {
    let t = tempfile::tempdir().unwrap();
    let run = |vars: &[(&str, &str)]| {
        let mut cmd = child_command("open-default", t.path(), "unused");
        for var in [
            "ABICACHE_DIR",
            "XDG_CACHE_HOME",
            "HOME",
            "ABICACHE_LOCK_TIMEOUT",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(vars.iter().copied());
        let r = results(cmd.spawn().unwrap());
        r[0].replace(&t.path().display().to_string(), "[T]")
    };
    let dir = t.path().join("explicit");
    let xdg = t.path().join("xdg");
    let home = t.path().join("home");
    let (dir, xdg, home) = (
        dir.to_str().unwrap(),
        xdg.to_str().unwrap(),
        home.to_str().unwrap(),
    );
    assert_eq!(
        run(&[
            ("ABICACHE_DIR", dir),
            ("XDG_CACHE_HOME", xdg),
            ("HOME", home)
        ]),
        "ok [T]/explicit"
    );
    assert_eq!(
        run(&[("XDG_CACHE_HOME", xdg), ("HOME", home)]),
        "ok [T]/xdg/abicache"
    );
    assert_eq!(run(&[("HOME", home)]), "ok [T]/home/.cache/abicache");
    insta::assert_snapshot!("no_cache_dir", run(&[]));
    insta::assert_snapshot!(
        "bad_lock_timeout",
        run(&[("HOME", home), ("ABICACHE_LOCK_TIMEOUT", "soon")])
    );
    insta::assert_snapshot!(
        "bad_max_size",
        run(&[("HOME", home), ("ABICACHE_MAX_SIZE", "lots")])
    );
}
