//! Compiled objects through a real remote cache (`file://`): machine B (its own cache,
//! another checkout path) building an edited extension downloads the unchanged units'
//! objects and compiles only the edited one; a tampered remote object is refused with a
//! warning, compiled locally, and replaced on the remote. CUDA device steps
//! (`<key>.cudev`) travel and are verified the same way.

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

const DEVICE_UNIT_A: &str = r#"#include <cuda_runtime.h>
template <int N> __global__ void scale(float* x) {
  #pragma unroll
  for (int i = 0; i < N; ++i) x[threadIdx.x * N + i] *= 2.0f;
}
extern "C" int abicache_a(float* x) { scale<4><<<1, 32>>>(x); return (int)cudaGetLastError(); }
"#;

const DEVICE_UNIT_B: &str = r#"#include <cuda_runtime.h>
__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" int abicache_b(float* x) { add_one<<<1, 32>>>(x); return (int)cudaGetLastError(); }
"#;

/// A checkout at `dir` of a two-`.cu` extension built for `archs`.
fn cuda_checkout(dir: &Path, archs: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("a.cu"), DEVICE_UNIT_A).unwrap();
    std::fs::write(dir.join("b.cu"), DEVICE_UNIT_B).unwrap();
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        format!(
            "[[extension]]\nname = \"devsteps_remote\"\nsources = [\"a.cu\", \"b.cu\"]\n\
             cuda_archs = \"{archs}\"\n"
        ),
    )
    .unwrap();
    spec
}

/// `(reused, from_remote, compiled)` device steps of `arch` in `abicache stats --json`.
fn device_steps(stats: &Value, arch: &str) -> (u64, u64, u64) {
    let counts = &stats["device_steps"][arch];
    let n = |field: &str| counts[field].as_u64().unwrap_or(0);
    (n("reused"), n("from_remote"), n("compiled"))
}

fn remote_device_steps(remote: &Path) -> Vec<PathBuf> {
    remote_objects(remote)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cudev"))
        .collect()
}

/// Issue 50, "objects travel": CUDA device steps (one architecture's `cicc`
/// and `ptxas`) go through the remote's objects like unit objects. Machine A
/// builds for `8.0 9.0` and uploads its four steps; machine B (its own cache,
/// another checkout path) builds for `9.0`: new unit objects, but no device
/// step compiled. A tampered step is refused as a tampered unit object is,
/// compiled locally and replaced. Real pip nvcc, tiny kernels, no GPU.
#[test]
fn device_steps_travel_through_the_remote_objects_and_are_verified_like_unit_objects() {
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (a, b, c) = (Cache::new(), Cache::new(), Cache::new());

    let spec_a = cuda_checkout(&work.path().join("alice/devsteps"), "8.0 9.0");
    let (built, err) = build(&a, remote.path(), &spec_a);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(sorted(&built["compiled"]), ["a.cu", "b.cu"]);
    let stats = a.stats();
    assert_eq!(device_steps(&stats, "sm_80"), (0, 0, 2), "{stats}");
    assert_eq!(device_steps(&stats, "sm_90"), (0, 0, 2), "{stats}");
    let steps_by_a = remote_device_steps(remote.path());
    assert_eq!(steps_by_a.len(), 4, "{steps_by_a:?}");
    assert_eq!(
        u64_of(&stats, "remote_object_uploads"),
        6,
        "2 units, 4 steps"
    );

    // Machine B, another checkout path, `9.0` alone: the host objects compile
    // (another arch list), both `sm_90` steps come from the remote.
    let spec_b = cuda_checkout(&work.path().join("runner/_work/7/devsteps"), "9.0");
    let (got, err) = build(&b, remote.path(), &spec_b);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(got["hit"], false, "{got}");
    assert_eq!(sorted(&got["compiled"]), ["a.cu", "b.cu"], "{got}");
    let stats = b.stats();
    assert_eq!(device_steps(&stats, "sm_90"), (2, 2, 0), "{stats}");
    assert_eq!(stats["device_steps"].get("sm_80"), None, "{stats}");
    assert_eq!(u64_of(&stats, "remote_object_hits"), 2, "{stats}");
    assert_eq!(
        u64_of(&stats, "remote_object_uploads"),
        2,
        "its unit objects only: {stats}"
    );
    assert_eq!(remote_device_steps(remote.path()), steps_by_a);
    eprintln!(
        "device steps through the remote: A (8.0 9.0, cold) {:.2} s, B (9.0, steps from the remote) {:.2} s; B's images {}",
        built["seconds"].as_f64().unwrap(),
        got["seconds"].as_f64().unwrap(),
        got["device_images"]
    );
    assert_eq!(strings(&got["device_images"]), ["sm_90"], "{got}");
    let human = stdout(&b.run(args!["stats"]));
    assert!(
        human.contains("device steps sm_90   2 reused (2 from the remote), 0 compiled"),
        "{human}"
    );

    // Every step A uploaded is tampered with, and the remote keeps nothing
    // else (no entry, no unit object): machine C must compile its units and
    // asks for the `sm_90` steps, which are refused with a warning each,
    // compiled locally, and uploaded over the tampered ones.
    for blob in &steps_by_a {
        let mut bytes = std::fs::read(blob).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(blob, bytes).unwrap();
    }
    let tampered: Vec<Vec<u8>> = steps_by_a
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    for entry in walk(remote.path()) {
        if !steps_by_a.contains(&entry) {
            std::fs::remove_file(&entry).unwrap();
        }
    }
    let spec_c = cuda_checkout(&work.path().join("carol/devsteps"), "9.0");
    let (fixed, err) = build(&c, remote.path(), &spec_c);
    let warned: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warned.len(), 2, "{err}");
    assert!(
        warned
            .iter()
            .all(|w| w.contains("is corrupt") && w.contains("BLAKE3") && w.contains(".cudev`")),
        "{err}"
    );
    assert_eq!(sorted(&fixed["compiled"]), ["a.cu", "b.cu"], "{fixed}");
    let stats = c.stats();
    assert_eq!(device_steps(&stats, "sm_90"), (0, 0, 2), "{stats}");
    assert_eq!(u64_of(&stats, "remote_object_hits"), 0, "{stats}");
    let replaced = steps_by_a
        .iter()
        .zip(&tampered)
        .filter(|(p, old)| std::fs::read(p).unwrap() != **old)
        .count();
    assert_eq!(
        replaced, 2,
        "the two sm_90 steps are replaced, the sm_80 ones not"
    );
    let verdicts: Vec<bool> = steps_by_a
        .iter()
        .map(|blob| {
            let bytes = std::fs::read(blob).unwrap();
            let (header, used) = decode_object_header(&bytes).unwrap().unwrap();
            let name = blob.file_name().unwrap().to_str().unwrap();
            verify_object(name, &header, &Digest::of(&bytes[used..]), &[]).is_ok()
        })
        .collect();
    assert_eq!(verdicts.iter().filter(|ok| **ok).count(), 2, "{verdicts:?}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
