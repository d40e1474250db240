//! `Session::key` through the key memo (issue 12) is exactly the key a cold
//! scan gives, after each kind of edit, within the same timestamp tick as
//! the memo or not; an untouched project is answered from the memo
//! (`v1/key-memo/`), and changing a flag is another memo, never a stale key.
//! Real files and a real store; the environment is written out (no torch
//! is needed to key a CPU extension that includes no torch header).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use abicache::key::{Environment, ExtensionSpec};
use abicache::store::Store;
use abicache::Session;
use abicache_fs::RACY_WINDOW;
use abicache_test_support::environment::cpython312;
use abicache_test_support::write;

/// The key a fresh cache (no stat cache, no memo) computes.
fn cold_key(spec: &ExtensionSpec, root: &Path) -> String {
    let cache = tempfile::tempdir().unwrap();
    let session = Session::new(Store::open(cache.path()).unwrap(), cpython312("2.9.1"));
    session.prepare(spec, root).unwrap().keyed.key
}

fn memo_files(cache: &Path) -> usize {
    fs::read_dir(cache.join("v1/key-memo")).map_or(0, |d| d.count())
}

#[test]
fn warm_keys_equal_cold_keys_after_every_edit() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().to_path_buf();
    write(
        &root.join("csrc/ops.cpp"),
        "#include \"ops.h\"\n#include <detail/impl.h>\nint f();\n",
    );
    write(&root.join("csrc/ops.h"), "int ops; // aaaa\n");
    write(&root.join("include/detail/impl.h"), "int impl;\n");
    fs::create_dir_all(root.join("first/detail")).unwrap();
    let spec = ExtensionSpec::new("ops", [root.join("csrc/ops.cpp")])
        .with_extra_include_paths([root.join("first"), root.join("include")]);
    let cache = tempfile::tempdir().unwrap();
    let session = Session::new(Store::open(cache.path()).unwrap(), cpython312("2.9.1"));
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));

    let first = session.key(&spec, &root).unwrap();
    assert_eq!(first, cold_key(&spec, &root));
    // The memo is written beside the caller; `settle` waits for it.
    session.settle();
    assert_eq!(memo_files(cache.path()), 1, "the first key is remembered");

    type Edit = fn(&Path);
    let edits: [(&str, Edit); 5] = [
        ("an in-place edit of the same size", |r| {
            fs::write(r.join("csrc/ops.h"), "int ops; // bbbb\n").unwrap()
        }),
        ("a header appearing earlier in the include path", |r| {
            write(&r.join("first/detail/impl.h"), "int shadowing;\n");
        }),
        ("a rename-over", |r| {
            write(&r.join("csrc/new.h"), "int renamed;\n");
            fs::rename(r.join("csrc/new.h"), r.join("csrc/ops.h")).unwrap();
        }),
        ("a deleted header", |r| {
            fs::remove_file(r.join("first/detail/impl.h")).unwrap()
        }),
        ("an edit put back as it was", |r| {
            fs::write(r.join("csrc/ops.h"), "int ops; // aaaa\n").unwrap()
        }),
    ];
    let mut keys = vec![first];
    for (what, edit) in edits {
        edit(&root);
        // Same tick: the memo must not answer the old key.
        let warm = session.key(&spec, &root).unwrap();
        assert_eq!(warm, cold_key(&spec, &root), "{what}: at once");
        std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
        let stamped = session.key(&spec, &root).unwrap();
        assert_eq!(stamped, warm, "{what}: once aged");
        session.settle();
        let memo = fs::read_dir(cache.path().join("v1/key-memo"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect::<Vec<PathBuf>>();
        let before = memo
            .iter()
            .map(|p| fs::read(p).unwrap())
            .collect::<Vec<_>>();
        assert_eq!(
            session.key(&spec, &root).unwrap(),
            warm,
            "{what}: from the memo"
        );
        session.settle();
        let after = memo
            .iter()
            .map(|p| fs::read(p).unwrap())
            .collect::<Vec<_>>();
        assert_eq!(before, after, "{what}: a memo hit writes nothing");
        keys.push(warm);
    }
    assert_ne!(keys[0], keys[1], "the edits change the key");
    assert_eq!(keys[0], keys[5], "and putting the text back restores it");

    let flagged = spec.clone().with_extra_cflags(["-DX=1"]);
    let other = session.key(&flagged, &root).unwrap();
    assert_eq!(other, cold_key(&flagged, &root));
    session.settle();
    assert_eq!(memo_files(cache.path()), 2, "other inputs, another memo");
}

#[test]
fn a_dropped_session_has_written_the_stat_cache_and_the_memo_of_its_first_key() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().to_path_buf();
    write(&root.join("ops.cpp"), "#include \"ops.h\"\nint f();\n");
    write(&root.join("ops.h"), "int ops;\n");
    let spec = ExtensionSpec::new("ops", [root.join("ops.cpp")]);
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    let cache = tempfile::tempdir().unwrap();
    let session = Session::new(Store::open(cache.path()).unwrap(), cpython312("2.9.1"));
    let key = session.prepare(&spec, &root).unwrap().keyed.key;
    drop(session);
    assert_eq!(
        memo_files(cache.path()),
        1,
        "the memo is written by the drop"
    );
    let facts = abicache::scan::StatCache::open(cache.path().join("v1/scan-facts.bin"));
    assert_eq!(facts.len(), 2, "both files are in the stat cache");
    // A new session answers from what the first one wrote.
    let again = Session::new(Store::open(cache.path()).unwrap(), cpython312("2.9.1"));
    assert_eq!(again.key(&spec, &root).unwrap(), key);
}

/// Publishes an audited entry for `key` holding a small "library" (the
/// record describes the entry; nothing loads it here).
fn publish_entry(store: &Store, key: &str) {
    let guard = store.begin_build(key).unwrap();
    fs::write(guard.temp_dir().join("libops.so"), b"library bytes").unwrap();
    let mut manifest = abicache::store::Manifest::new(key, "ops", "payload");
    manifest.audit = Some(serde_json::json!({"verdict": "ok"}));
    let _published = guard.publish("libops.so", manifest).unwrap();
}

#[test]
fn a_warm_load_record_needs_a_stamped_entry_and_a_cuda_one_records_what_nvcc_was_found_by() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().to_path_buf();
    write(&root.join("ops.cpp"), "int ops;\n");
    write(&root.join("kernel.cu"), "int kernel;\n");
    let cache = tempfile::tempdir().unwrap();
    let store = Store::open(cache.path()).unwrap();
    // nvcc's release given: a CUDA key needs no toolchain here.
    let cuda_env = Environment {
        nvcc_version: Some("13.2".into()),
        cuda_archs: Some("9.0".into()),
        ..cpython312("2.9.1")
    };
    let session = Session::new(store.clone(), cuda_env);
    let cpu = ExtensionSpec::new("ops", [root.join("ops.cpp")]);
    let cuda = ExtensionSpec::new("ops", [root.join("ops.cpp"), root.join("kernel.cu")]);
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    let cpu_key = session.key(&cpu, &root).unwrap();
    let cuda_key = session.key(&cuda, &root).unwrap();
    // Keys remembered, no entries yet: nothing to describe.
    assert!(!session.remember_warm_load(&cpu, &root, "cpu", &[]));
    publish_entry(&store, &cpu_key);
    publish_entry(&store, &cuda_key);
    // A fresh library is racy: no trusted stamp, no record.
    assert!(!session.remember_warm_load(&cpu, &root, "cpu", &[]));
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    for key in [&cpu_key, &cuda_key] {
        assert!(
            store.lookup(key).unwrap().hit.is_some(),
            "hashed and stamped"
        );
    }
    assert!(session.remember_warm_load(&cpu, &root, "cpu", &[]));
    let record: serde_json::Value =
        serde_json::from_slice(&fs::read(cache.path().join("v1/warm/cpu")).unwrap()).unwrap();
    assert_eq!(record["key"], cpu_key.as_str());
    // A CUDA extension's record also holds the values nvcc was searched by
    // and the arch list, compared by equality (the environment named nvcc's
    // release, so no nvcc stamp; the arch list is given, so no GPU listing).
    assert!(session.remember_warm_load(&cuda, &root, "cuda", &[]));
    let record: serde_json::Value =
        serde_json::from_slice(&fs::read(cache.path().join("v1/warm/cuda")).unwrap()).unwrap();
    assert_eq!(record["key"], cuda_key.as_str());
    let recorded: Vec<&str> = record["environ"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap())
        .collect();
    for variable in abicache::warm_load::CUDA_HIT_VARIABLES {
        assert!(recorded.contains(&variable), "{variable} in {record}");
    }
    assert!(record["gpus"].is_null(), "{record}");
}

/// `key` published in `store`, aged past the racy window and looked up
/// once (which hashes and stamps it): ready for a warm-load record.
fn publish_stamped(store: &Store, key: &str) {
    publish_entry(store, key);
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    assert!(
        store.lookup(key).unwrap().hit.is_some(),
        "hashed and stamped"
    );
}

/// The warm-load record `name` of the cache at `cache`.
fn read_record(cache: &Path, name: &str) -> serde_json::Value {
    serde_json::from_slice(&fs::read(cache.join("v1/warm").join(name)).unwrap()).unwrap()
}

/// The first column (a path or a variable) of every row of `field`.
fn first_column<'r>(record: &'r serde_json::Value, field: &str) -> Vec<&'r str> {
    record[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap())
        .collect()
}

#[test]
fn a_native_cpu_flag_record_holds_the_cpu_and_the_compiler_that_resolved_it() {
    // `-march=native` resolved here by the real host compiler (`c++` on
    // `PATH`, `CXX` unset in the test environment or naming it).
    let project = tempfile::tempdir().unwrap();
    let root = project.path().to_path_buf();
    write(&root.join("ops.cpp"), "int ops;\n");
    let cache = tempfile::tempdir().unwrap();
    let store = Store::open(cache.path()).unwrap();
    let native = ExtensionSpec::new("ops", [root.join("ops.cpp")])
        .with_extra_cflags(["-O2", "-march=native"]);
    let session = Session::new(store.clone(), cpython312("2.9.1"));
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    let key = session.key(&native, &root).unwrap();
    publish_stamped(&store, &key);
    assert!(session.remember_warm_load(&native, &root, "native", &[]));
    let record = read_record(cache.path(), "native");
    assert_eq!(record["key"], key.as_str());
    let cpu = abicache_isa::running_cpu().expect("this machine has /proc/cpuinfo");
    assert_eq!(
        record["host_cpu"],
        cpu.identity(),
        "the CPU the flag was resolved on"
    );
    let recorded = first_column(&record, "environ");
    for variable in abicache::warm_load::COMPILER_HIT_VARIABLES {
        assert!(recorded.contains(&variable), "{variable} in {record}");
    }
    assert!(
        !recorded.contains(&"PATH"),
        "PATH is not compared by value: the reader searches it again: {record}"
    );
    let toolchain = abicache_build::ToolchainEnv::from_process();
    let compiler = abicache_build::host_cpu_compiler(&toolchain).unwrap();
    match toolchain.cxx.as_deref().filter(|c| c.contains('/')) {
        // `CXX` names a path: its stamp.
        Some(_) => assert!(
            first_column(&record, "stat").contains(&compiler.to_str().unwrap()),
            "the compiler's stamp: {record}"
        ),
        // A name searched on `PATH`: the name and the stamp of the file found.
        None => {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(&compiler).unwrap();
            assert_eq!(
                record["compiler"],
                serde_json::json!([
                    toolchain.cxx.as_deref().unwrap_or("c++"),
                    [
                        meta.dev(),
                        meta.ino(),
                        meta.size(),
                        meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
                        meta.ctime() * 1_000_000_000 + meta.ctime_nsec()
                    ]
                ]),
                "the compiler searched for and the file found: {record}"
            );
        }
    }

    // Keyed for a CPU an environment file names (another machine's): not
    // resolved here, so nothing to check it by, and no record.
    let elsewhere = Session::new(
        store.clone(),
        Environment {
            host_cpu: Some("-march=znver4".into()),
            ..cpython312("2.9.1")
        },
    );
    publish_stamped(&store, &elsewhere.key(&native, &root).unwrap());
    assert!(!elsewhere.remember_warm_load(&native, &root, "elsewhere", &[]));
    // A spec without a native flag has no `host_cpu`.
    let plain = ExtensionSpec::new("ops", [root.join("ops.cpp")]);
    publish_stamped(&store, &session.key(&plain, &root).unwrap());
    assert!(session.remember_warm_load(&plain, &root, "plain", &[]));
    assert!(read_record(cache.path(), "plain")["host_cpu"].is_null());
}
