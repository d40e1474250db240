//! Precompiled headers in the store: missing, busy, adopted, verified, removed when
//! corrupt or stale, failed builds remembered, and evicted by gc. Real files; the `.gch`
//! bytes are arbitrary here (the build crate's tests compile real ones).

use crate::common;

use std::path::Path;
use std::time::Duration;

use abicache_store::{FileLock, PchLookup, MANIFEST_FILE};
use common::*;

/// What a finished background build leaves: the stub, the `.gch`, the depfile.
fn finish_build(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("abicache-pch.h"), "#error stub\n").unwrap();
    std::fs::write(dir.join("abicache-pch.h.gch"), vec![7u8; 4096]).unwrap();
    std::fs::write(dir.join("abicache-pch.d"), "x.gch: a.h\n").unwrap();
}

#[test]
fn a_built_pch_is_adopted_verified_and_removed_when_corrupt_or_stale() {
    let (t, store) = temp_store();
    let k = key("pch");
    assert_eq!(store.pch_lookup(&k, t.path()).unwrap(), PchLookup::Missing);

    let paths = store.pch_paths(&k).unwrap();
    assert_eq!(paths.dir, store.pch_root().join(&k));
    assert!(paths.temp_dir.starts_with(store.layout().tmp_dir()));
    {
        let _held = FileLock::try_acquire(&paths.lock).unwrap().unwrap();
        assert_eq!(store.pch_lookup(&k, t.path()).unwrap(), PchLookup::Busy);
    }

    finish_build(&paths.dir);
    assert_eq!(
        store.pch_lookup(&k, t.path()).unwrap(),
        PchLookup::Unadopted(paths.dir.clone())
    );
    let header = t.path().join("umbrella.h");
    std::fs::write(&header, "#pragma once\n").unwrap();
    assert_eq!(
        store
            .pch_adopt(&k, std::slice::from_ref(&header), t.path())
            .unwrap(),
        PchLookup::Ready(paths.dir.clone())
    );
    assert!(paths.dir.join(MANIFEST_FILE).is_file());
    assert_eq!(
        store.pch_lookup(&k, t.path()).unwrap(),
        PchLookup::Ready(paths.dir.clone())
    );

    // A truncated `.gch` is never handed out.
    std::fs::write(paths.dir.join("abicache-pch.h.gch"), vec![7u8; 100]).unwrap();
    let PchLookup::Removed(warning) = store.pch_lookup(&k, t.path()).unwrap() else {
        panic!("corrupt PCH not removed");
    };
    assert!(
        warning.contains("abicache-pch.h.gch") && warning.contains("corrupt"),
        "{warning}"
    );
    assert!(!paths.dir.exists());
    assert_eq!(store.pch_lookup(&k, t.path()).unwrap(), PchLookup::Missing);

    // A header it was compiled from changed: stale.
    // (recorded relative to the directory compilers run in, checked under it)
    finish_build(&paths.dir);
    store
        .pch_adopt(&k, &[Path::new("umbrella.h").to_path_buf()], t.path())
        .unwrap();
    assert_eq!(
        store.pch_lookup(&k, t.path()).unwrap(),
        PchLookup::Ready(paths.dir.clone())
    );
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&header, "#pragma once\n// edited\n").unwrap();
    let PchLookup::Removed(warning) = store.pch_lookup(&k, t.path()).unwrap() else {
        panic!("stale PCH not removed");
    };
    assert!(
        warning.contains("umbrella.h") && warning.contains("changed"),
        "{warning}"
    );

    // A failed build is remembered, not retried; removing it allows a retry.
    std::fs::create_dir_all(&paths.failed_dir).unwrap();
    assert_eq!(
        store.pch_lookup(&k, t.path()).unwrap(),
        PchLookup::Failed(paths.failed_dir.clone())
    );
    store.pch_remove(&k).unwrap();
    assert_eq!(store.pch_lookup(&k, t.path()).unwrap(), PchLookup::Missing);
}

#[test]
fn gc_evicts_pch_directories_with_the_objects() {
    let (_t, store) = temp_store();
    let k = key("gc");
    let paths = store.pch_paths(&k).unwrap();
    finish_build(&paths.dir);
    store.pch_adopt(&k, &[], _t.path()).unwrap();
    let report = store.gc(0).unwrap();
    assert_eq!(report.objects_evicted, 1);
    assert!(report.object_bytes_freed >= 4096);
    assert!(!paths.dir.exists());
}

#[test]
fn gc_forgets_pch_demand_no_build_added_to_for_thirty_days_and_keeps_the_rest() {
    let (t, store) = temp_store();
    let (stale, recent, too_large) = (key("stale"), key("recent"), key("large"));
    assert_eq!(store.pch_record_need(&stale).unwrap(), 1);
    assert_eq!(store.pch_record_need(&recent).unwrap(), 1);
    let demand = t.path().join("cache").join("v1").join("pch-demand");
    let age = |name: &str, ago: Duration| {
        std::fs::File::options()
            .write(true)
            .open(demand.join(name))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - ago)
            .unwrap();
    };
    let month = abicache_store::PCH_DEMAND_MAX_AGE + Duration::from_secs(3600);
    age(&stale, month);
    // A too-large record stops a rebuild until the cap grows: it stays however old.
    std::fs::write(
        demand.join(format!("{too_large}.too-large")),
        r#"{"bytes":1}"#,
    )
    .unwrap();
    age(&format!("{too_large}.too-large"), month);
    // A write interrupted between its temporary file and the rename.
    std::fs::write(demand.join(format!("{too_large}.4242.tmp")), "{").unwrap();
    age(&format!("{too_large}.4242.tmp"), Duration::from_secs(3600));

    let report = store.gc(u64::MAX).unwrap();
    assert_eq!(report.pch_demand_removed, 2);
    assert!(
        !demand.join(&stale).exists(),
        "no need recorded for over 30 days"
    );
    assert!(!demand.join(format!("{too_large}.4242.tmp")).exists());
    assert!(demand.join(&recent).exists());
    assert!(demand.join(format!("{too_large}.too-large")).exists());
    // The forgotten flag set starts over: its next build is a first use again.
    assert_eq!(store.pch_record_need(&stale).unwrap(), 1);
    assert_eq!(store.pch_record_need(&recent).unwrap(), 2);
}
