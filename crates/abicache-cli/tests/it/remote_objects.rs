//! Compiled objects through a real remote cache (`file://`): machine B (its own cache,
//! another checkout path) building an edited extension downloads the unchanged units'
//! objects and compiles only the edited one; a tampered remote object is refused with a
//! warning, compiled locally, and replaced on the remote.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use abicache::remote::objects::{decode_object_header, verify_object};
use abicache::remote::Digest;
use common::*;
use serde_json::Value;

const CALL_MULADD: &str = r#"
import sys, torch
torch.ops.load_library(sys.argv[1])
a = torch.tensor([1.0, 2.0])
b = torch.tensor([3.0, 4.0])
print(torch.ops.muladd_example.muladd(a, b, 0.5).tolist())
"#;

/// A machine: its own cache, the shared `file://` remote.
fn build(cache: &Cache, remote: &Path, spec: &Path) -> (Value, String) {
    let mut cmd: Command = cache.cmd(args![
        "build",
        spec,
        "--python",
        python(),
        "--json",
        "--quiet"
    ]);
    cmd.env("ABICACHE_REMOTE", format!("file://{}", remote.display()));
    let out = cmd.output().unwrap();
    assert_success(&out);
    (serde_json::from_slice(&out.stdout).unwrap(), stderr(&out))
}

/// A checkout of `examples/cpu_muladd` at `dir`, with `unit` (if any) edited by `edit`.
fn checkout(dir: &Path, unit: Option<(&str, &str)>) -> PathBuf {
    copy_dir(&repo_path("examples/cpu_muladd"), dir);
    if let Some((unit, edit)) = unit {
        let path = dir.join(unit);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{text}\n{edit}\n")).unwrap();
    }
    dir.join("abicache.toml")
}

fn remote_objects(remote: &Path) -> Vec<PathBuf> {
    let mut objects: Vec<PathBuf> = std::fs::read_dir(remote.join("v1/objects"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    objects.sort();
    objects
}

fn sorted(value: &Value) -> Vec<String> {
    let mut units = strings(value);
    units.sort();
    units
}

#[test]
fn machine_b_building_an_edited_extension_compiles_only_the_edited_unit() {
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (a, b, c) = (Cache::new(), Cache::new(), Cache::new());

    // Machine A builds the example and uploads its entry and both objects.
    let spec_a = checkout(&work.path().join("alice/cpu_muladd"), None);
    let (built, err) = build(&a, remote.path(), &spec_a);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(sorted(&built["compiled"]), ["kernel.cpp", "ops.cpp"]);
    let uploaded_by_a = remote_objects(remote.path());
    assert_eq!(uploaded_by_a.len(), 2, "{uploaded_by_a:?}");
    assert_eq!(u64_of(&a.stats(), "remote_object_uploads"), 2);

    // Machine B, another checkout path, `kernel.cpp` edited: `ops.cpp`'s object comes
    // from the remote, only `kernel.cpp` is compiled, and the library works.
    let spec_b = checkout(
        &work.path().join("runner/_work/3/cpu_muladd"),
        Some(("kernel.cpp", "int remote_objects_edit_b() { return 2; }")),
    );
    let (got, err) = build(&b, remote.path(), &spec_b);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(got["hit"], false, "{got}");
    assert_eq!(strings(&got["compiled"]), ["kernel.cpp"], "{got}");
    assert_eq!(got["cached_units"], 1, "{got}");
    let stats = b.stats();
    assert_eq!(u64_of(&stats, "remote_object_hits"), 1, "{stats}");
    assert_eq!(u64_of(&stats, "remote_object_uploads"), 1, "{stats}");
    let library = PathBuf::from(got["path"].as_str().unwrap());
    assert!(library.starts_with(&b.dir));
    assert_eq!(python_run(&python(), CALL_MULADD, &library), "[3.5, 8.5]");

    // Every object A uploaded is tampered with: one byte of the object flipped.
    for blob in &uploaded_by_a {
        let mut bytes = std::fs::read(blob).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(blob, bytes).unwrap();
    }

    // Machine C edits `ops.cpp`: the `kernel.cpp` object it would download is refused
    // with one warning, compiled locally, and uploaded over the tampered one.
    let spec_c = checkout(
        &work.path().join("carol/cpu_muladd"),
        Some(("ops.cpp", "int remote_objects_edit_c() { return 3; }")),
    );
    let (fixed, err) = build(&c, remote.path(), &spec_c);
    let warned: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].contains("is corrupt")
            && warned[0].contains("BLAKE3")
            && warned[0].ends_with("compiling `kernel.cpp` locally"),
        "{err}"
    );
    assert_eq!(
        sorted(&fixed["compiled"]),
        ["kernel.cpp", "ops.cpp"],
        "{fixed}"
    );
    let library = PathBuf::from(fixed["path"].as_str().unwrap());
    assert_eq!(python_run(&python(), CALL_MULADD, &library), "[3.5, 8.5]");
    let stats = c.stats();
    assert_eq!(u64_of(&stats, "remote_object_hits"), 0, "{stats}");
    assert_eq!(u64_of(&stats, "remote_errors"), 1, "{stats}");

    // The replaced `kernel.cpp` object verifies again; `ops.cpp`'s A object is still
    // the tampered one (nobody needed it), and is still refused.
    let verdicts: Vec<bool> = uploaded_by_a
        .iter()
        .map(|blob| {
            let bytes = std::fs::read(blob).unwrap();
            let (header, used) = decode_object_header(&bytes).unwrap().unwrap();
            let name = blob.file_name().unwrap().to_str().unwrap();
            verify_object(name, &header, &Digest::of(&bytes[used..]), &[]).is_ok()
        })
        .collect();
    assert_eq!(verdicts.iter().filter(|ok| **ok).count(), 1, "{verdicts:?}");
}

#[test]
fn remote_objects_off_downloads_and_uploads_no_object() {
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cache = Cache::new();
    let spec = checkout(&work.path().join("cpu_muladd"), None);
    let mut cmd = cache.cmd(args![
        "build",
        &spec,
        "--python",
        python(),
        "--json",
        "--quiet"
    ]);
    cmd.env(
        "ABICACHE_REMOTE",
        format!("file://{}", remote.path().display()),
    )
    .env("ABICACHE_REMOTE_OBJECTS", "0");
    let out = cmd.output().unwrap();
    assert_success(&out);
    assert!(remote_objects(remote.path()).is_empty());
    assert_eq!(
        u64_of(&cache.stats(), "remote_uploads"),
        1,
        "the entry still goes"
    );

    // A value it does not understand is bad input, named, before anything is compiled.
    let empty_remote = tempfile::tempdir().unwrap();
    let mut cmd = Cache::new().cmd(args!["build", &spec, "--python", python(), "--json"]);
    cmd.env(
        "ABICACHE_REMOTE",
        format!("file://{}", empty_remote.path().display()),
    )
    .env("ABICACHE_REMOTE_OBJECTS", "sometimes");
    let out = cmd.output().unwrap();
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("`ABICACHE_REMOTE_OBJECTS=sometimes` is not understood"),
        "{err}"
    );
}
