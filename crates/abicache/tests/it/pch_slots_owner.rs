//! Issue 46, finding 11: the per-user PCH slots live in
//! `$TMPDIR/abicache-<uid>/pch-slots`; on a shared `/tmp` another user could
//! create `abicache-<uid>` first, and every background PCH build was then
//! refused with a message naming the wrong fix (`ABICACHE_DIR`). Now the slot
//! is taken in the cache's own `v1/locks/pch-slots` and a warning names the
//! right settings (`XDG_RUNTIME_DIR`, `TMPDIR`).
//!
//! The other user is a real Unix user made for the test (`useradd`, root
//! only); the PCH is a real `g++` compile of a small header. This binary
//! holds one test: it sets `TMPDIR` in its own process.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use abicache::build::PchRequest;
use abicache::pch::{resolve, start_missing, PchStart};
use abicache::store::{MachineSlots, PchSkip, Store};

/// A Unix user made for this test, removed when dropped.
struct OtherUser {
    name: String,
    uid: u32,
}

impl OtherUser {
    /// Makes one, or `None` (after a visible skip) without root or `useradd`.
    fn create() -> Option<OtherUser> {
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        if me != 0 || Command::new("useradd").arg("--help").output().is_err() {
            abicache_test_support::skip_for_privilege(
                "root and `useradd`, to make a directory as another Unix user",
            );
            return None;
        }
        let name = format!("abicache-slots-{}", std::process::id());
        let made = Command::new("useradd")
            .args(["--system", "--no-create-home", "--user-group", &name])
            .output()
            .unwrap();
        assert!(made.status.success(), "useradd {name}: {made:?}");
        let id = Command::new("id").args(["-u", &name]).output().unwrap();
        let uid = String::from_utf8_lossy(&id.stdout).trim().parse().unwrap();
        Some(OtherUser { name, uid })
    }

    /// Runs `argv` as this user.
    fn run(&self, argv: &[&str]) {
        let out = Command::new("runuser")
            .args(["-u", &self.name, "--"])
            .args(argv)
            .output()
            .unwrap();
        assert!(out.status.success(), "as {}: {argv:?}: {out:?}", self.name);
    }
}

impl Drop for OtherUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// The PCH request of a small header under `root`, compiled by `g++`.
fn request(root: &Path) -> PchRequest {
    std::fs::create_dir_all(root.join("include/small")).unwrap();
    std::fs::write(
        root.join("include/small/umbrella.h"),
        "#pragma once\nstruct Small { int x; };\ninline int small() { return 1; }\n",
    )
    .unwrap();
    PchRequest {
        key: blake3::hash(b"slots-owner").to_hex().to_string(),
        header: "small/umbrella.h".into(),
        compiler: PathBuf::from("g++"),
        flags: vec!["-std=c++17".into(), "-Iinclude".into()],
        unkeyed_flags: vec![],
        dir: root.to_path_buf(),
        units: vec!["src/a.cpp".into()],
    }
}

#[test]
fn a_slots_directory_another_user_created_in_tmp_moves_the_slot_into_the_cache() {
    // It sets `TMPDIR` for its process: alone in it.
    if !abicache_test_support::alone_in_process(
        "pch_slots_owner::a_slots_directory_another_user_created_in_tmp_moves_the_slot_into_the_cache",
    ) {
        return;
    }
    let Some(intruder) = OtherUser::create() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A shared `/tmp`: world-writable and sticky.
    let tmp = t.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let squatted = tmp.join("abicache-0");
    intruder.run(&["mkdir", "-m", "0755", squatted.to_str().unwrap()]);
    assert_eq!(std::fs::metadata(&squatted).unwrap().uid(), intruder.uid);

    std::env::set_var("TMPDIR", &tmp);
    std::env::remove_var("XDG_RUNTIME_DIR");
    std::env::remove_var("ABICACHE_PCH_JOBS");
    let slots = MachineSlots::for_settings(&abicache::settings::StoreSettings::from_env().unwrap())
        .unwrap();
    assert_eq!(slots.dir, squatted.join("pch-slots"));

    let store = Store::open(t.path().join("cache"))
        .unwrap()
        .with_pch_max_size(None)
        .with_max_size(None);
    let request = request(&t.path().join("ext"));
    let mut starts = Vec::new();
    let mut warnings = Vec::new();
    for _ in 0..2 {
        let plan = resolve(&store, vec![request.clone()], &mut warnings);
        let out = start_missing(
            &store,
            &plan.missing,
            &["src/a.cpp".to_string()],
            &slots,
            &mut warnings,
        );
        starts.extend(out.into_iter().map(|(_, start)| start));
    }
    let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        starts,
        [PchStart::Skipped(PchSkip::FirstUse), PchStart::Started],
        "the second need did not start the PCH build: {warnings:#?}"
    );
    match warnings.as_slice() {
        [line] => {
            for part in [
                squatted.display().to_string(),
                format!("belongs to uid {}", intruder.uid),
                "v1/locks/pch-slots".into(),
                "`XDG_RUNTIME_DIR` (or `TMPDIR`)".into(),
            ] {
                assert!(line.contains(&part), "`{part}` not in: {line}");
            }
            assert!(!line.contains("ABICACHE_DIR"), "the wrong fix: {line}");
        }
        other => panic!("expected one line about the slots directory: {other:#?}"),
    }

    // The PCH is built and usable.
    let paths = store.pch_paths(&request.key).unwrap();
    let started = Instant::now();
    while !paths.dir.join("abicache-pch.h.gch").is_file() {
        assert!(
            !paths.failed_dir.exists(),
            "failed: {}",
            std::fs::read_to_string(paths.failed_dir.join("abicache-pch.log")).unwrap_or_default()
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "PCH build hung"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing was written into the other user's directory.
    assert_eq!(std::fs::read_dir(&squatted).unwrap().count(), 0);
}
