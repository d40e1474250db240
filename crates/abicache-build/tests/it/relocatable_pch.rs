//! Relocatable objects and precompiled headers, with the real compiler and torch's
//! libraries from the venv (for the link). The units include a small local umbrella
//! header instead of `torch/extension.h`, so a PCH costs a second, not a minute; the
//! torch-sized measurement is in `benches/bench_pch.py` (`scripts/bench.sh`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abicache_build::pch::{PCH_BUILD_DEADLINE, PCH_FILE, PCH_HEADER, PCH_LOG, PCH_STUB};
use abicache_build::{
    build, pch_requests, spawn_background_build, BuildOptions, BuildPlan, BuildReport, PchSlot,
    Progress, ReadyPch, Toolchain, ToolchainEnv, Unit,
};

/// torch's package dir in `<workspace>/.venv`, if it exists (the link needs its libraries).
fn torch_dir() -> Option<PathBuf> {
    let lib = abicache_test_support::repo_root().join(".venv/lib");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages").join("torch"))
        .filter(|p| p.join("lib").is_dir())
        .collect();
    dirs.sort();
    dirs.pop().map(|p| p.canonicalize().unwrap())
}

use abicache_test_support::skip;

const UMBRELLA: &str = r#"#pragma once
#include <map>
#include <string>
#include <vector>
inline int umbrella_value() { return 40; }
"#;

/// Starts with the umbrella header: a PCH candidate. Uses `__FILE__`, whose text ends up
/// in the object.
const UNIT_A: &str = r#"// a comment before the first directive is fine
#include <big/umbrella.h>
#include "local.h"
extern "C" int unit_a() { return umbrella_value() + LOCAL_TWO; }
extern "C" const char* unit_a_file() { return __FILE__; }
"#;

/// Defines a macro first: never a PCH candidate.
const UNIT_B: &str = r#"#define B_VALUE 7
#include <big/umbrella.h>
extern "C" int unit_b() { return B_VALUE; }
"#;

/// A checkout at `dir`: `src/a.cpp`, `src/b.cpp`, `src/local.h`, `include/big/umbrella.h`.
fn checkout(dir: &Path, b_text: &str) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("include/big")).unwrap();
    std::fs::write(dir.join("include/big/umbrella.h"), UMBRELLA).unwrap();
    std::fs::write(dir.join("src/local.h"), "#define LOCAL_TWO 2\n").unwrap();
    std::fs::write(dir.join("src/a.cpp"), UNIT_A).unwrap();
    std::fs::write(dir.join("src/b.cpp"), b_text).unwrap();
}

/// The plan for the checkout at `root`, with the scanner's relative display paths and
/// the files' real BLAKE3, as the façade fills it.
fn plan(root: &Path, torch: &Path, extra_cflags: &[&str]) -> BuildPlan {
    let hash = |rel: &str| {
        blake3::hash(&std::fs::read(root.join(rel)).unwrap())
            .to_hex()
            .to_string()
    };
    let unit = |rel: &str, deps: &[&str]| Unit {
        source: root.join(rel),
        files: std::iter::once(rel)
            .chain(deps.iter().copied())
            .map(|f| (f.to_string(), hash(f)))
            .collect(),
        uses_extension_name: false,
    };
    BuildPlan {
        name: "reloc_ext".into(),
        sources: vec![
            unit("src/a.cpp", &["include/big/umbrella.h", "src/local.h"]),
            unit("src/b.cpp", &["include/big/umbrella.h"]),
        ],
        cxx11_abi: true,
        torch_dir: torch.to_path_buf(),
        extra_include_paths: vec![root.join("include")],
        extra_cflags: extra_cflags.iter().map(|s| s.to_string()).collect(),
        abi_fields: "python_abi=agnostic\ntorch=2.15.0\ncxx11_abi=1\n".into(),
        root: Some(root.to_path_buf()),
        ..Default::default()
    }
}

fn toolchain() -> Toolchain {
    Toolchain::discover(&ToolchainEnv::from_process(), &[], false).expect("a host C++ compiler")
}

/// One checkout of the two-unit project (`UNIT_B`) in a temporary directory,
/// with the host toolchain and its plan.
struct Checkout {
    t: tempfile::TempDir,
    root: PathBuf,
    torch: PathBuf,
    tc: Toolchain,
    plan: BuildPlan,
}

/// [`Checkout`] with `extra_cflags`; `None`, after a visible skip, without a venv with torch.
fn one_checkout(extra_cflags: &[&str]) -> Option<Checkout> {
    let Some(torch) = torch_dir() else {
        skip("no venv with torch; run scripts/setup-venv.sh");
        return None;
    };
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("ext");
    checkout(&root, UNIT_B);
    let plan = plan(&root, &torch, extra_cflags);
    Some(Checkout {
        t,
        root,
        torch,
        tc: toolchain(),
        plan,
    })
}

/// Builds `plan` with two jobs, offering it `pch`, quietly; the build must succeed.
fn build_with(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    objects: &Path,
    out: &Path,
    pch: Vec<ReadyPch>,
) -> BuildReport {
    let opts = BuildOptions {
        jobs: Some(2),
        pch,
        ..Default::default()
    };
    build(plan, toolchain, objects, out, &opts, &|_: Progress| {}).unwrap()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn a_second_checkout_with_one_unit_edited_compiles_exactly_that_unit() {
    let Some(torch) = torch_dir() else {
        return skip("no venv with torch; run scripts/setup-venv.sh");
    };
    let t = tempfile::tempdir().unwrap();
    let (first, second) = (t.path().join("alice/ext"), t.path().join("ci/work/ext"));
    checkout(&first, UNIT_B);
    checkout(&second, &UNIT_B.replace("7", "8"));
    let objects = t.path().join("objects");
    let tc = toolchain();

    let r1 = build_with(
        &plan(&first, &torch, &[]),
        &tc,
        &objects,
        &t.path().join("out1"),
        vec![],
    );
    assert_eq!(sorted(r1.units_compiled), ["src/a.cpp", "src/b.cpp"]);

    let r2 = build_with(
        &plan(&second, &torch, &[]),
        &tc,
        &objects,
        &t.path().join("out2"),
        vec![],
    );
    assert_eq!(
        r2.units_compiled,
        ["src/b.cpp"],
        "only the edited unit compiles"
    );
    assert_eq!(r2.units_cached, 1);

    // No object names either checkout: `__FILE__` is relative to the root.
    for entry in std::fs::read_dir(&objects).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!contains(&bytes, "alice") && !contains(&bytes, "/ci/work"));
    }
    let a_object = std::fs::read_dir(&objects)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .find(|bytes| contains(bytes, "unit_a_file"))
        .unwrap();
    assert!(contains(&a_object, "src/a.cpp"));

    // compile_commands.json runs in the root with relative paths.
    let cc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(t.path().join("out2/compile_commands.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cc[0]["directory"], second.display().to_string());
    assert_eq!(cc[0]["file"], "src/a.cpp");
    let args: Vec<&str> = cc[0]["arguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"-Iinclude"), "{args:?}");
    let prefix_map = format!("-ffile-prefix-map={}=.", second.display());
    assert!(args.contains(&prefix_map.as_str()), "{args:?}");
}

/// One story: a unit that starts with the umbrella header asks for a PCH, the other does
/// not; built in the background, the PCH is really used (a rejected one would have hit its
/// `#error` stub), the object is byte-identical to one compiled without it, and a PCH
/// built with other flags is detected as rejected and the unit compiled without it.
#[test]
fn units_starting_with_an_umbrella_header_use_a_pch_and_a_rejected_one_is_detected() {
    let Some(Checkout {
        t,
        root,
        torch,
        tc,
        plan,
    }) = one_checkout(&["-DMODE=1"])
    else {
        return;
    };
    let umbrellas = vec!["big/umbrella.h".to_string()];

    let requests = pch_requests(&plan, &tc, &umbrellas);
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.header, "big/umbrella.h");
    assert_eq!(request.units, ["src/a.cpp"], "b.cpp defines a macro first");
    assert!(request.flags.contains(&"-Iinclude".to_string()));
    assert!(!request
        .flags
        .iter()
        .any(|f| f.starts_with("-DTORCH_EXTENSION_NAME=")));
    // The key ignores where the checkout is.
    let elsewhere = t.path().join("other/ext");
    checkout(&elsewhere, UNIT_B);
    let moved = pch_requests(
        &self::plan(&elsewhere, &torch, &["-DMODE=1"]),
        &tc,
        &umbrellas,
    );
    assert_eq!(moved[0].key, request.key);

    // The background build: a detached process holding its locks, renamed into place.
    let slot = PchSlot {
        lock: t.path().join("pch.lock"),
        temp_dir: t.path().join("tmp/pch-build"),
        built_dir: t.path().join("pch/ready"),
        failed_dir: t.path().join("pch/failed"),
        deadline: PCH_BUILD_DEADLINE,
    };
    std::fs::create_dir_all(t.path().join("tmp")).unwrap();
    std::fs::create_dir_all(t.path().join("pch")).unwrap();
    spawn_background_build(request, &slot, held(&slot)).unwrap();
    let started = Instant::now();
    while !slot.built_dir.is_dir() && !slot.failed_dir.is_dir() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "background PCH build hung"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        slot.built_dir.join(PCH_FILE).is_file(),
        "failed: see {}",
        slot.failed_dir.display()
    );
    assert_eq!(
        std::fs::read_to_string(slot.built_dir.join(PCH_HEADER)).unwrap(),
        PCH_STUB
    );
    let deps = std::fs::read_to_string(slot.built_dir.join("abicache-pch.d")).unwrap();
    assert!(deps.contains("umbrella.h"), "{deps}");

    let ready = |dir: &Path| {
        vec![ReadyPch {
            key: request.key.clone(),
            dir: dir.to_path_buf(),
            units: request.units.clone(),
        }]
    };
    let with_pch = t.path().join("objects-pch");
    let r = build_with(
        &plan,
        &tc,
        &with_pch,
        &t.path().join("out1"),
        ready(&slot.built_dir),
    );
    assert_eq!(r.pch_units, ["src/a.cpp"]);
    assert!(r.pch_rejected.is_empty());
    // compile_commands.json is for tools (clangd cannot read GCC's `.gch`): no PCH there.
    let cc = std::fs::read_to_string(t.path().join("out1/compile_commands.json")).unwrap();
    assert!(!cc.contains("abicache-pch.h"), "{cc}");

    // Without the PCH: the same object keys, and byte-identical objects.
    let without = t.path().join("objects-plain");
    let r = build_with(&plan, &tc, &without, &t.path().join("out2"), vec![]);
    assert!(r.pch_units.is_empty());
    let listing = |dir: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(listing(&with_pch), listing(&without));

    // A PCH built with `-DMODE=1` offered to a plan with `-DMODE=2`: GCC rejects it, the
    // stub's `#error` says so, and the unit is compiled without it.
    let other = self::plan(&root, &torch, &["-DMODE=2"]);
    let r = build_with(
        &other,
        &tc,
        &t.path().join("objects-other"),
        &t.path().join("out3"),
        ready(&slot.built_dir),
    );
    assert_eq!(sorted(r.units_compiled), ["src/a.cpp", "src/b.cpp"]);
    assert!(r.pch_units.is_empty());
    assert_eq!(r.pch_rejected, std::slice::from_ref(&request.key));
}

/// The three locked files a builder inherits (as the store's `PchPermit` hands them over):
/// `slot.lock` and two beside it standing for the cache's and the machine slot's.
fn held(slot: &PchSlot) -> [std::fs::File; 3] {
    [
        slot.lock.clone(),
        slot.lock.with_extension("cache"),
        slot.lock.with_extension("slot"),
    ]
    .map(|path| {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        file.try_lock().unwrap();
        file
    })
}

/// A PCH request for the checkout at `root` made by hand (no torch needed): the host
/// compiler, `-Iinclude`, run in `root`.
fn small_request(root: &Path, compiler: &Path) -> abicache_build::PchRequest {
    abicache_build::PchRequest {
        key: "k".repeat(64),
        header: "big/umbrella.h".into(),
        compiler: compiler.to_path_buf(),
        flags: vec!["-std=c++17".into(), "-Iinclude".into()],
        unkeyed_flags: vec![],
        dir: root.to_path_buf(),
        units: vec!["src/a.cpp".into()],
    }
}

/// True while some process holds `lock` (an `flock`).
fn locked(lock: &Path) -> bool {
    let Ok(file) = std::fs::File::open(lock) else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => false,
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(e) => panic!("{e}"),
    }
}

/// Waits until every slot's lock is free and its temp dir gone (the builds ended).
fn wait_for_builds(slots: &[&PchSlot]) {
    let started = Instant::now();
    while slots.iter().any(|s| locked(&s.lock) || s.temp_dir.exists()) {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "background PCH builds hung"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A second builder of the same PCH used to `mv` its directory *into* the published one
/// (`pch/<key>/pch-<key>.…/`), so adoption failed and the PCH was skipped for good; and
/// one started after the first had finished built it all over again.
#[test]
fn two_background_builds_of_one_pch_at_once_publish_one_directory_without_nesting() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("ext");
    checkout(&root, UNIT_B);
    let request = small_request(&root, &toolchain().cxx.path);
    std::fs::create_dir_all(t.path().join("tmp")).unwrap();
    std::fs::create_dir_all(t.path().join("pch")).unwrap();
    // Two locks: both really compile at once (as two stores on one PCH directory, or a
    // lock file removed under a builder), and race for the rename.
    let first = PchSlot {
        lock: t.path().join("a.lock"),
        temp_dir: t.path().join("tmp/pch-a"),
        built_dir: t.path().join("pch/ready"),
        failed_dir: t.path().join("pch/ready.failed"),
        deadline: PCH_BUILD_DEADLINE,
    };
    let second = PchSlot {
        lock: t.path().join("b.lock"),
        temp_dir: t.path().join("tmp/pch-b"),
        ..first.clone()
    };
    spawn_background_build(&request, &first, held(&first)).unwrap();
    spawn_background_build(&request, &second, held(&second)).unwrap();
    wait_for_builds(&[&first, &second]);
    let mut names: Vec<String> = std::fs::read_dir(&first.built_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["abicache-pch.d", PCH_HEADER, PCH_FILE, PCH_LOG],
        "one published directory, nothing nested in it"
    );
    assert!(!first.failed_dir.exists());
    assert_eq!(
        std::fs::read_dir(t.path().join("tmp")).unwrap().count(),
        0,
        "the loser removed its directory"
    );

    // A third, started once the PCH is published, exits without compiling.
    let built_at = std::fs::metadata(first.built_dir.join(PCH_FILE))
        .unwrap()
        .modified()
        .unwrap();
    let third = PchSlot {
        temp_dir: t.path().join("tmp/pch-c"),
        ..first.clone()
    };
    spawn_background_build(&request, &third, held(&third)).unwrap();
    wait_for_builds(&[&third]);
    assert_eq!(
        std::fs::metadata(first.built_dir.join(PCH_FILE))
            .unwrap()
            .modified()
            .unwrap(),
        built_at,
        "not rebuilt"
    );
    assert_eq!(std::fs::read_dir(&first.built_dir).unwrap().count(), 4);
}

/// The background compile had no time limit: a compiler that hangs held the PCH lock
/// (and a CPU) forever.
#[test]
fn a_background_pch_build_past_its_deadline_is_killed_and_recorded_as_failed() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("ext");
    checkout(&root, UNIT_B);
    let hang = t.path().join("hanging-cxx");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 60\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hang, std::fs::Permissions::from_mode(0o755)).unwrap();
    let request = small_request(&root, &hang);
    std::fs::create_dir_all(t.path().join("pch")).unwrap();
    let slot = PchSlot {
        lock: t.path().join("pch.lock"),
        temp_dir: t.path().join("tmp/pch-a"),
        built_dir: t.path().join("pch/ready"),
        failed_dir: t.path().join("pch/ready.failed"),
        deadline: Duration::from_secs(1),
    };
    let started = Instant::now();
    spawn_background_build(&request, &slot, held(&slot)).unwrap();
    wait_for_builds(&[&slot]);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(!slot.built_dir.exists());
    let log = std::fs::read_to_string(slot.failed_dir.join(PCH_LOG)).unwrap();
    assert!(log.contains("ran past its deadline of 1 s"), "{log}");
}

/// A PCH removed between resolving it and compiling (gc, another build dropping it) made
/// the unit fail outright: `-include <gone>/abicache-pch.h: No such file or directory`.
#[test]
fn a_pch_that_vanished_before_the_compile_is_rejected_and_the_unit_compiled_without_it() {
    let Some(Checkout { t, tc, plan, .. }) = one_checkout(&[]) else {
        return;
    };
    let requests = pch_requests(&plan, &tc, &["big/umbrella.h".to_string()]);
    let gone = vec![ReadyPch {
        key: requests[0].key.clone(),
        dir: t.path().join("pch/removed-meanwhile"),
        units: requests[0].units.clone(),
    }];
    let r = build_with(
        &plan,
        &tc,
        &t.path().join("objects"),
        &t.path().join("out"),
        gone,
    );
    assert_eq!(sorted(r.units_compiled), ["src/a.cpp", "src/b.cpp"]);
    assert!(r.pch_units.is_empty());
    assert_eq!(r.pch_rejected, [requests[0].key.clone()]);
}
