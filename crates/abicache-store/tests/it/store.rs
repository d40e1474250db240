//! The store in one process: publish, verified lookup, corruption, layout
//! permissions, gc, remove and stats. Real files only.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use abicache_store::{Claim, Corruption, Event, Hit, Manifest, Store, StoreError, MANIFEST_FILE};
use common::*;

#[test]
fn publish_then_lookup_is_a_verified_hit_with_filled_manifest() {
    let (_t, store) = temp_store();
    let k = key("a");
    assert!(store.lookup(&k).unwrap().hit.is_none());
    let published = publish(&store, &k, "ext", b"\x7fELF pretend library");
    let found = store.lookup(&k).unwrap();
    assert!(found.warnings.is_empty());
    let hit = found.hit.expect("published entry is a hit");
    assert!(hit.rehashed, "the first lookup hashes the library");
    assert_eq!(
        Hit {
            rehashed: false,
            ..hit.clone()
        },
        published
    );
    assert_eq!(hit.dir, store.layout().entry_dir(&k));
    assert_eq!(
        std::fs::read(&hit.library).unwrap(),
        b"\x7fELF pretend library"
    );
    let m = &hit.manifest;
    assert_eq!(
        (
            m.format,
            m.key.as_str(),
            m.name.as_str(),
            m.library.as_str()
        ),
        (2, k.as_str(), "ext", "libext.so")
    );
    assert_eq!(m.size, 20);
    assert_eq!(
        m.library_blake3,
        blake3::hash(b"\x7fELF pretend library").to_hex().as_str()
    );
    assert_eq!(m.units, 2);
    // The manifest on disk is the one returned, and the build directory is gone.
    assert_eq!(Manifest::read(&hit.dir.join(MANIFEST_FILE)).unwrap(), *m);
    assert!(dir_names(&store.layout().tmp_dir()).is_empty());
    let files = dir_names(&hit.dir);
    assert_eq!(files, ["last-used", "libext.so", "manifest.json"]);
}

#[test]
fn build_dir_without_manifest_is_invisible_and_dropped_guard_removes_it() {
    let (_t, store) = temp_store();
    let k = key("partial");
    let guard = store.begin_build(&k).unwrap();
    std::fs::write(guard.temp_dir().join("libx.so"), b"half written").unwrap();
    let temp = guard.temp_dir().to_owned();
    assert!(temp.starts_with(store.layout().tmp_dir()));
    assert_eq!(std::fs::metadata(&temp).unwrap().mode() & 0o777, 0o700);
    assert!(store.lookup(&k).unwrap().hit.is_none());
    assert!(store.list().unwrap().is_empty());
    drop(guard);
    assert!(!temp.exists(), "an abandoned build directory is removed");
}

#[test]
fn entry_dir_without_manifest_is_a_silent_miss_and_publish_replaces_it() {
    let (_t, store) = temp_store();
    let k = key("no-manifest");
    let dir = store.layout().entry_dir(&k);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("libx.so"), b"orphan").unwrap();
    let found = store.lookup(&k).unwrap();
    assert!(found.hit.is_none() && found.warnings.is_empty());
    assert!(store.list().unwrap().is_empty());
    let hit = publish(&store, &k, "x", b"fresh");
    assert_eq!(std::fs::read(hit.library).unwrap(), b"fresh");
    assert_eq!(dir_names(&dir), ["last-used", "libx.so", "manifest.json"]);
}

/// Publishes an entry, damages it with `damage`, and returns the lookup's single warning text.
fn corrupt_lookup(damage: impl FnOnce(&std::path::Path)) -> (String, Corruption) {
    let (_t, store) = temp_store();
    let k = key("corrupt");
    let hit = publish(&store, &k, "ext", &[7u8; 4096]);
    damage(&hit.library);
    let found = store.lookup(&k).unwrap();
    assert!(found.hit.is_none(), "a corrupt entry is never a hit");
    assert_eq!(found.warnings.len(), 1);
    let w = &found.warnings[0];
    assert!(w.removed);
    assert!(!hit.dir.exists(), "the corrupt entry is removed");
    // It is a plain miss afterwards, and can be rebuilt.
    let again = store.lookup(&k).unwrap();
    assert!(again.hit.is_none() && again.warnings.is_empty());
    publish(&store, &k, "ext", &[7u8; 4096]);
    assert!(store.lookup(&k).unwrap().hit.is_some());
    let text = w
        .to_string()
        .replace(&store.root().display().to_string(), "[ROOT]")
        .replace(&k, "[KEY]");
    (text, w.problem.clone())
}

#[test]
fn truncated_library_is_removed_and_missed_with_a_warning() {
    let (text, problem) = corrupt_lookup(|lib| {
        let f = std::fs::OpenOptions::new().write(true).open(lib).unwrap();
        f.set_len(1000).unwrap();
    });
    assert!(matches!(
        problem,
        Corruption::SizeMismatch {
            expected: 4096,
            found: 1000,
            ..
        }
    ));
    insta::assert_snapshot!(text);
}

#[test]
fn flipped_byte_in_library_is_removed_and_missed_with_a_warning() {
    let (text, problem) = corrupt_lookup(|lib| {
        let mut bytes = std::fs::read(lib).unwrap();
        bytes[2048] ^= 1;
        std::fs::write(lib, bytes).unwrap();
    });
    assert!(matches!(problem, Corruption::HashMismatch { .. }));
    insta::assert_snapshot!(text);
}

#[test]
fn missing_library_is_removed_and_missed_with_a_warning() {
    let (text, problem) = corrupt_lookup(|lib| std::fs::remove_file(lib).unwrap());
    assert!(matches!(problem, Corruption::MissingLibrary { .. }));
    insta::assert_snapshot!(text);
}

#[test]
fn unparseable_manifest_is_removed_and_missed_with_a_warning() {
    let (text, problem) = corrupt_lookup(|lib| {
        std::fs::write(
            lib.parent().unwrap().join(MANIFEST_FILE),
            b"{\"format\": 1,",
        )
        .unwrap()
    });
    assert!(matches!(problem, Corruption::UnreadableManifest { .. }));
    insta::assert_snapshot!(text);
}

/// Issue 46 finding 3: an entry whose manifest records no instruction-set
/// requirements this abicache can trust (an older abicache's format 1, or a
/// current format without `isa`) is not a hit: it is removed with a warning
/// saying why, never read as requiring nothing.
#[test]
fn a_manifest_without_trusted_requirements_is_removed_and_missed_with_a_warning() {
    let edit = |change: fn(&mut serde_json::Value)| {
        move |lib: &std::path::Path| {
            let path = lib.parent().unwrap().join(MANIFEST_FILE);
            let mut manifest: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            change(&mut manifest);
            std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
        }
    };
    let (text, problem) = corrupt_lookup(edit(|m| m["format"] = 1.into()));
    assert_eq!(problem, Corruption::UnknownRequirements { format: 1 });
    assert!(
        text.contains("older abicache") && text.contains("SIGILL"),
        "{text}"
    );
    let (_, problem) = corrupt_lookup(edit(|m| {
        m.as_object_mut().unwrap().remove("isa");
    }));
    assert_eq!(problem, Corruption::UnknownRequirements { format: 2 });
    let (_, problem) = corrupt_lookup(edit(|m| {
        m.as_object_mut().unwrap().remove("isa");
        m["format"] = 1.into();
    }));
    assert_eq!(problem, Corruption::UnknownRequirements { format: 1 });
    insta::assert_snapshot!(text);
}

#[test]
fn open_creates_owner_only_dirs_and_cachedir_tag() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("deep/cache");
    let store = open(&root);
    let layout = store.layout();
    for dir in [
        root.clone(),
        layout.version_dir().to_owned(),
        layout.entries_dir(),
        layout.tmp_dir(),
        layout.locks_dir(),
        layout.objects_dir(),
    ] {
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    assert_eq!(store.objects_dir(), root.join("v1/objects"));
    let tag = std::fs::read_to_string(root.join("CACHEDIR.TAG")).unwrap();
    assert!(tag.starts_with("Signature: 8a477f597d28d172789f06886806bc55"));
    // Opening again is fine.
    open(&root);
}

#[test]
fn world_writable_root_is_refused_naming_chmod_and_abicache_dir() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("cache");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Store::open(&root).unwrap_err();
    assert!(matches!(err, StoreError::InsecureMode { mode: 0o777, .. }));
    filtered(&root).bind(|| insta::assert_snapshot!(err.to_string()));
    // A group-writable v1 directory under a good root is refused too.
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir(root.join("v1")).unwrap();
    std::fs::set_permissions(root.join("v1"), std::fs::Permissions::from_mode(0o770)).unwrap();
    assert!(matches!(
        Store::open(&root).unwrap_err(),
        StoreError::InsecureMode { mode: 0o770, .. }
    ));
}

#[test]
fn root_owned_by_another_uid_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("cache");
    std::fs::create_dir(&root).unwrap();
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    let other = if me == 1 { 2 } else { 1 };
    if std::os::unix::fs::chown(&root, Some(other), None).is_err() {
        // Not root: we cannot create a foreign-owned directory; the check is then untestable here.
        assert_ne!(me, 0, "root must be able to chown");
        return;
    }
    let err = Store::open(&root).unwrap_err();
    assert!(
        matches!(err, StoreError::ForeignOwner { owner, uid, .. } if owner == other && uid == me)
    );
    let text = filtered(&root).bind(|| err.to_string());
    let text = text
        .replace(&format!("uid {me}"), "uid [ME]")
        .replace(&format!("chown {me} "), "chown [ME] ");
    filtered(&root).bind(|| insta::assert_snapshot!(text));
}

#[test]
fn gc_evicts_least_recently_used_first_until_under_max_size() {
    let (_t, store) = temp_store();
    let keys: Vec<String> = (0..4).map(|i| key(&format!("gc{i}"))).collect();
    for (i, k) in keys.iter().enumerate() {
        publish(&store, k, &format!("e{i}"), &vec![i as u8; 10_000]);
        set_last_used(&store, k, 1_000_000 + i as u64 * 100);
    }
    // A hit makes the oldest entry the most recently used.
    assert!(store.lookup(&keys[0]).unwrap().hit.is_some());
    let entry_size = store.list().unwrap()[0].size;
    assert!(entry_size > 10_000, "size counts the manifest too");
    let report = store.gc(2 * entry_size + 1).unwrap();
    let evicted: Vec<&str> = report.evicted.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        evicted,
        [keys[1].as_str(), keys[2].as_str()],
        "least recently used first"
    );
    assert_eq!(report.bytes_before, 4 * entry_size);
    assert_eq!(report.bytes_after, 2 * entry_size);
    let left: Vec<String> = store.list().unwrap().into_iter().map(|e| e.key).collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&keys[0]) && left.contains(&keys[3]));
    assert_eq!(store.counters().unwrap().evictions, 2);
    // Under the limit already: nothing happens.
    assert!(store.gc(u64::MAX).unwrap().evicted.is_empty());
    assert_eq!(store.gc(0).unwrap().bytes_after, 0);
}

#[test]
fn gc_skips_entries_whose_lock_is_held() {
    let (_t, store) = temp_store();
    let (old, new) = (key("old"), key("new"));
    publish(&store, &old, "old", b"old library");
    publish(&store, &new, "new", b"new library");
    set_last_used(&store, &old, 1000);
    let in_use = store.begin_build(&old).unwrap();
    let report = store.gc(0).unwrap();
    assert_eq!(report.skipped_locked, std::slice::from_ref(&old));
    assert_eq!(report.evicted.len(), 1);
    assert_eq!(report.evicted[0].key, new);
    assert!(store.lookup(&old).unwrap().hit.is_some());
    drop(in_use);
}

/// Writes an object of `size` bytes into the object cache, modified at `secs`.
fn object(store: &Store, name: &str, size: usize, secs: u64) -> std::path::PathBuf {
    let dir = store.objects_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, vec![7u8; size]).unwrap();
    let file = std::fs::File::options().append(true).open(&path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
    path
}

#[test]
fn gc_evicts_compiled_objects_oldest_first_before_entries() {
    let (_t, store) = temp_store();
    let k = key("entry");
    publish(&store, &k, "entry", &[1u8; 1000]);
    let entry_size = store.list().unwrap()[0].size;
    let old = object(&store, "old.o", 5000, 1_000);
    let new = object(&store, "new.o", 5000, 2_000);
    let stale_tmp = object(&store, ".abc.123-0.tmp.o", 100, 1_000);
    let report = store.gc(entry_size + 5000).unwrap();
    assert_eq!(
        (report.objects_evicted, report.object_bytes_freed),
        (1, 5000)
    );
    assert!(
        !old.exists() && new.exists(),
        "the least recently modified object goes first"
    );
    assert!(
        !stale_tmp.exists(),
        "a killed compile's temporary object is swept"
    );
    assert!(
        report.evicted.is_empty(),
        "entries stay while evicting objects suffices"
    );
    assert_eq!(report.bytes_before, entry_size + 10_000);
    assert_eq!(report.bytes_after, entry_size + 5000);
}

#[test]
fn gc_leaves_objects_alone_while_a_build_runs() {
    let (_t, store) = temp_store();
    let obj = object(&store, "unit.o", 5000, 1_000);
    let building = store.begin_build(&key("building")).unwrap();
    let report = store.gc(0).unwrap();
    assert!(report.objects_skipped_busy);
    assert!(obj.exists(), "a running build may be about to link it");
    drop(building);
    let report = store.gc(0).unwrap();
    assert_eq!(report.objects_evicted, 1);
    assert!(!obj.exists());
}

#[test]
fn max_size_collects_after_publish_but_never_the_new_entry() {
    let (_t, store) = temp_store();
    let store = store.with_max_size(Some(1));
    let first = key("first");
    publish(&store, &first, "first", b"one");
    let stale_object = object(&store, "unit.o", 100, 1_000);
    let guard = match store.lookup_or_lock(&key("second")).unwrap() {
        Claim::Build { guard, .. } => guard,
        Claim::Hit { .. } => unreachable!(),
    };
    std::fs::write(guard.temp_dir().join("lib.so"), b"two").unwrap();
    let published = guard
        .publish("lib.so", Manifest::new("", "second", "p"))
        .unwrap();
    let gc = published.gc.expect("max size set");
    assert_eq!(
        gc.evicted
            .iter()
            .map(|e| e.key.as_str())
            .collect::<Vec<_>>(),
        [first.as_str()]
    );
    // The publisher's own lock (still held) does not count as a running build.
    assert_eq!(gc.objects_evicted, 1);
    assert!(!stale_object.exists());
    assert_eq!(
        published.hit.manifest.key,
        key("second"),
        "an empty manifest key is filled in"
    );
    assert!(store.lookup(&key("second")).unwrap().hit.is_some());
}

#[test]
fn remove_by_name_key_or_key_prefix() {
    let (_t, store) = temp_store();
    let (a1, a2, b) = (key("a1"), key("a2"), key("b"));
    publish(&store, &a1, "alpha", b"1");
    publish(&store, &a2, "alpha", b"2");
    publish(&store, &b, "beta", b"3");
    assert_eq!(store.remove("nothing").unwrap(), 0);
    assert_eq!(
        store.remove(&b[..7]).unwrap(),
        0,
        "prefixes shorter than 8 do not match"
    );
    assert_eq!(store.remove("alpha").unwrap(), 2);
    assert_eq!(store.remove(&b[..8]).unwrap(), 1);
    assert!(store.list().unwrap().is_empty());
    assert!(dir_names(&store.layout().entries_dir()).is_empty());
}

#[test]
fn list_and_find_by_name_report_entries_most_recent_first() {
    let (_t, store) = temp_store();
    let (a1, a2, b) = (key("a1"), key("a2"), key("b"));
    publish(&store, &a1, "alpha", b"1");
    publish(&store, &a2, "alpha", b"22");
    publish(&store, &b, "beta", b"333");
    set_last_used(&store, &a1, 2000);
    set_last_used(&store, &a2, 1000);
    let found = store.find_by_name("alpha").unwrap();
    assert_eq!(
        found.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
        [a1.as_str(), a2.as_str()]
    );
    assert_eq!(
        found[0].last_used,
        std::time::UNIX_EPOCH + Duration::from_secs(2000)
    );
    assert_eq!(found[1].manifest.size, 2);
    let names: Vec<String> = store.list().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["alpha", "alpha", "beta"]);
}

#[test]
fn stats_count_events_and_entries() {
    let (_t, store) = temp_store();
    publish(&store, &key("s"), "s", b"12345");
    store
        .record_all(&[
            Event::Miss,
            Event::Build { seconds: 2.0 },
            Event::Hit {
                compile_seconds: 2.0,
            },
            Event::Hit {
                compile_seconds: 2.0,
            },
            Event::Error,
            Event::Corrupt,
        ])
        .unwrap();
    let stats = store.stats().unwrap();
    let s = &stats.counters;
    assert_eq!(
        (s.hits, s.misses, s.builds, s.errors, s.corrupt),
        (2, 1, 1, 1, 1)
    );
    assert_eq!((s.build_seconds, s.saved_seconds), (2.0, 4.0));
    assert_eq!(stats.entries, 1);
    assert!(stats.bytes > 5);
    // A damaged `stats.json` counts as zero rather than failing builds; the
    // events in the log still count.
    std::fs::write(store.layout().stats_path(), b"garbage").unwrap();
    store.record(Event::Miss).unwrap();
    assert_eq!(store.counters().unwrap().misses, 2);
}

#[test]
fn publish_errors_name_what_to_do() {
    let (_t, store) = temp_store();
    let k = key("errors");
    let guard = store.begin_build(&k).unwrap();
    let err = guard
        .publish("libnothere.so", Manifest::new(&k, "e", "p"))
        .unwrap_err();
    let text = err.to_string();
    let text = text
        .replace(&store.root().display().to_string(), "[ROOT]")
        .replace(&k, "[KEY]");
    let text = regex_free_tmp_suffix(&text);
    insta::assert_snapshot!("publish_missing_library", text);
    let guard = store.begin_build(&k).unwrap();
    std::fs::write(guard.temp_dir().join("lib.so"), b"x").unwrap();
    let err = guard
        .publish("lib.so", Manifest::new("someotherkey", "e", "p"))
        .unwrap_err();
    insta::assert_snapshot!("publish_key_mismatch", err.to_string().replace(&k, "[KEY]"));
    let guard = store.begin_build(&k).unwrap();
    let err = guard
        .publish("../escape.so", Manifest::new(&k, "e", "p"))
        .unwrap_err();
    insta::assert_snapshot!("publish_bad_library_name", err.to_string());
    assert!(
        dir_names(&store.layout().tmp_dir()).is_empty(),
        "failed publishes leave no build directory"
    );
}

/// Replaces the random suffix of a temp dir name (`tmp/[KEY].XXXXXX/`) with `[RANDOM]`.
fn regex_free_tmp_suffix(text: &str) -> String {
    match text.find("tmp/[KEY].") {
        Some(i) => {
            let start = i + "tmp/[KEY].".len();
            let end = start + text[start..].find('/').unwrap();
            format!("{}[RANDOM]{}", &text[..start], &text[end..])
        }
        None => text.to_owned(),
    }
}

#[test]
fn stale_temp_dirs_are_cleaned_but_a_live_build_dir_is_kept() {
    let (_t, store) = temp_store();
    let (dead, live) = (key("dead"), key("live"));
    let tmp = store.layout().tmp_dir();
    // A build directory of a process that died: its key lock is free.
    std::fs::create_dir_all(tmp.join(format!("{dead}.abc123/sub"))).unwrap();
    // A live build in this process (the lock is held by another open file).
    let guard = store.begin_build(&live).unwrap();
    let reopened = open(store.root());
    assert_eq!(
        dir_names(&tmp),
        [guard.temp_dir().file_name().unwrap().to_string_lossy()]
    );
    assert_eq!(reopened.gc(u64::MAX).unwrap().temp_dirs_removed, 0);
    assert!(guard.temp_dir().exists());
    drop(guard);
    // Unrecognised names are kept until they are an hour old.
    std::fs::create_dir(tmp.join("not a key.x")).unwrap();
    std::fs::create_dir(tmp.join("weird name")).unwrap();
    assert_eq!(store.clean_stale_temp_dirs(), 0);
    let old = std::time::SystemTime::now() - Duration::from_secs(7200);
    std::fs::File::open(tmp.join("weird name"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(store.clean_stale_temp_dirs(), 1);
}

#[test]
fn invalid_keys_are_refused_before_touching_disk() {
    let (_t, store) = temp_store();
    for bad in ["../x", "a/b", "", "a.b"] {
        assert!(matches!(
            store.lookup(bad).unwrap_err(),
            StoreError::InvalidKey { .. }
        ));
        assert!(matches!(
            store.begin_build(bad).unwrap_err(),
            StoreError::InvalidKey { .. }
        ));
    }
}

#[test]
fn corrupt_entry_locked_by_another_builder_is_missed_but_left_to_it() {
    let (_t, store) = temp_store();
    let k = key("busy");
    let hit = publish(&store, &k, "busy", b"library bytes");
    std::fs::write(&hit.library, b"library bytez").unwrap();
    let builder = store.begin_build(&k).unwrap(); // another open file holds the lock
    let found = store.lookup(&k).unwrap();
    assert!(found.hit.is_none());
    assert!(!found.warnings[0].removed);
    assert!(
        hit.dir.exists(),
        "left for the lock holder, which replaces it on publish"
    );
    let text = found.warnings[0]
        .to_string()
        .replace(&store.root().display().to_string(), "[ROOT]")
        .replace(&k, "[KEY]");
    insta::assert_snapshot!(text);
    std::fs::write(builder.temp_dir().join("libbusy.so"), b"fixed").unwrap();
    let _ = builder
        .publish("libbusy.so", Manifest::new(&k, "busy", "p"))
        .unwrap();
    assert_eq!(
        std::fs::read(store.lookup(&k).unwrap().hit.unwrap().library).unwrap(),
        b"fixed"
    );
}

/// A killed `prebuild --matrix` left its environments (gigabytes) in
/// `v1/matrix-envs/run.*`, which gc neither removed nor counted.
#[test]
fn gc_removes_matrix_run_dirs_a_dead_run_left_and_counts_their_bytes() {
    let (_t, store) = temp_store();
    let runs = store.layout().matrix_envs_dir();
    let dead = runs.join("run.dead");
    let live = runs.join("run.live");
    for dir in [&dead, &live] {
        std::fs::create_dir_all(dir.join("py3.11-torch2.15/lib")).unwrap();
        std::fs::write(
            dir.join("py3.11-torch2.15/lib/torch.so"),
            vec![0u8; 100_000],
        )
        .unwrap();
    }
    // A live run holds its lock for as long as it runs.
    let held = abicache_store::FileLock::try_acquire(&live.join(abicache_store::MATRIX_RUN_LOCK))
        .unwrap()
        .unwrap();
    let young = store
        .clone()
        .with_gc_grace(Duration::from_secs(3600))
        .gc(u64::MAX)
        .unwrap();
    assert_eq!(
        young.matrix_runs_removed, 0,
        "changed within the grace period"
    );
    let report = store
        .clone()
        .with_gc_grace(Duration::ZERO)
        .gc(u64::MAX)
        .unwrap();
    assert_eq!(report.matrix_runs_removed, 1);
    assert!(report.matrix_bytes_freed >= 100_000, "{report:?}");
    assert!(!dead.exists());
    assert!(
        live.join("py3.11-torch2.15/lib/torch.so").is_file(),
        "its run still holds it"
    );
    drop(held);
}

/// Configuring trusted keys did not re-check entries already pulled: an
/// entry imported unsigned (or signed by another key) stayed served.
#[test]
fn a_pulled_entry_unsigned_or_signed_by_an_untrusted_key_is_not_served_under_trusted_keys() {
    use abicache_store::{Claim, Provenance, PROVENANCE_FILE};
    let (_t, store) = temp_store();
    let pulled = |k: &str, signed_by: Option<&str>| {
        let Claim::Build { guard, .. } = store.lookup_or_lock(k).unwrap() else {
            panic!("{k} cached")
        };
        std::fs::write(guard.temp_dir().join("libp.so"), b"\x7fELF pulled").unwrap();
        Provenance {
            source: "bundle".into(),
            origin: "fleet.abicache".into(),
            signed_by: signed_by.map(str::to_owned),
        }
        .write_into(guard.temp_dir())
        .unwrap();
        let _ = guard
            .publish("libp.so", Manifest::new(k, "p", "payload"))
            .unwrap();
    };
    let (unsigned, theirs, ours, local) =
        (key("unsigned"), key("theirs"), key("ours"), key("local"));
    pulled(&unsigned, None);
    pulled(&theirs, Some("ed25519:theirs"));
    pulled(&ours, Some("ed25519:ours"));
    publish(&store, &local, "local", b"\x7fELF built here");
    let recorded: Provenance = serde_json::from_slice(
        &std::fs::read(store.layout().entry_dir(&theirs).join(PROVENANCE_FILE)).unwrap(),
    )
    .unwrap();
    assert_eq!(recorded.signed_by.as_deref(), Some("ed25519:theirs"));
    // Without trusted keys every entry is served, as documented.
    for k in [&unsigned, &theirs, &ours, &local] {
        assert!(store.lookup(k).unwrap().hit.is_some(), "{k}");
    }
    let strict = store
        .clone()
        .with_trusted_signers(vec!["ed25519:ours".into()]);
    for (k, why) in [
        (&unsigned, "pulled from bundle `fleet.abicache` unsigned"),
        (
            &theirs,
            "signed by `ed25519:theirs`, which is not one of `ABICACHE_TRUSTED_KEYS`",
        ),
    ] {
        let found = strict.lookup(k).unwrap();
        assert!(found.hit.is_none(), "{k} was served");
        assert!(
            found.warnings[0].to_string().contains(why),
            "{}",
            found.warnings[0]
        );
        assert!(
            !store.layout().entry_dir(k).exists(),
            "removed, to be rebuilt"
        );
    }
    assert!(
        strict.lookup(&ours).unwrap().hit.is_some(),
        "signed by a trusted key"
    );
    assert!(strict.lookup(&local).unwrap().hit.is_some(), "built here");
}

/// CUDA device steps are counted per architecture through the stats log
/// and add up over builds (what `abicache stats` shows per architecture).
#[test]
fn device_steps_are_counted_per_architecture() {
    let (_t, store) = temp_store();
    let steps = |arch: &str, reused, from_remote, compiled| Event::DeviceSteps {
        arch: arch.into(),
        reused,
        from_remote,
        compiled,
    };
    store.record_all(&[steps("sm_80", 0, 0, 2)]).unwrap();
    store
        .record_all(&[steps("sm_80", 2, 1, 0), steps("sm_90", 1, 1, 2)])
        .unwrap();
    let counters = store.counters().unwrap();
    let got: Vec<(&str, u64, u64, u64)> = counters
        .device_steps
        .iter()
        .map(|(arch, c)| (arch.as_str(), c.reused, c.from_remote, c.compiled))
        .collect();
    assert_eq!(got, [("sm_80", 2, 1, 2), ("sm_90", 1, 1, 2)]);
}
