//! Issue 48, "covering entries are reused": with no arch list chosen, the
//! list comes from the visible GPUs, and a miss on that exact key is served
//! by an entry of the same extension whose device code covers the GPUs.
//!
//! Through the local cache, a read-only layer and a `file://` remote.
//!
//! There is no GPU on the test machines: an `nvidia-smi` stub on `PATH`
//! prints the GPUs each step pretends to have, and
//! `ABICACHE_TEST_ONLY_NO_NVML=1` keeps NVML out, so the stub is what
//! abicache reads. The CUDA example is compiled for real with
//! the pip nvcc; the `8.0 9.0` entry is built once and shared by the steps.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A directory with an `nvidia-smi` stub listing `$STUB_GPUS` (space
/// separated capabilities), in either query abicache asks.
fn stub_nvidia_smi() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let stub = dir.path().join("nvidia-smi");
    std::fs::write(
        &stub,
        "#!/bin/sh\n\
         # A stub: no GPU here. Prints the GPUs the test names in STUB_GPUS.\n\
         i=0\n\
         for cap in $STUB_GPUS; do\n\
           case \"$*\" in\n\
             *index,name,compute_cap*) echo \"$i, Stub GPU $cap, $cap\" ;;\n\
             *) echo \"$cap\" ;;\n\
           esac\n\
           i=$((i+1))\n\
         done\n",
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The CUDA example without its `cuda_archs`, so the arch list is the
/// visible GPUs' unless `TORCH_CUDA_ARCH_LIST` is set.
fn spec_without_archs(dir: &Path) -> PathBuf {
    let example = repo_path("examples/cuda_axpy");
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        format!(
            "[[extension]]\nname = \"cuda_axpy\"\nsources = [\"{}\", \"{}\"]\n\
             required_ops = [\"axpy\"]\n",
            example.join("ops.cpp").display(),
            example.join("axpy_kernel.cu").display(),
        ),
    )
    .unwrap();
    spec
}

/// `abicache ARGS` against `cache` with the stub GPUs `gpus` first on
/// `PATH` and `TORCH_CUDA_ARCH_LIST` set to `archs` (else unset).
fn with_gpus(cache: &Cache, stub: &Path, gpus: &str, archs: Option<&str>) -> Command {
    let path = format!("{}:{}", stub.display(), std::env::var("PATH").unwrap());
    let mut cmd = cache.cmd(Vec::<&str>::new());
    cmd.env("PATH", path)
        .env("STUB_GPUS", gpus)
        // NVML is skipped so the stub stands in even where GPUs exist.
        .env("ABICACHE_TEST_ONLY_NO_NVML", "1");
    if let Some(archs) = archs {
        cmd.env("TORCH_CUDA_ARCH_LIST", archs);
    }
    cmd
}

/// `abicache build SPEC --json --quiet` on the stubbed GPUs `gpus`.
fn build(
    cache: &Cache,
    stub: &Path,
    spec: &Path,
    gpus: &str,
    archs: Option<&str>,
) -> serde_json::Value {
    let out = with_gpus(cache, stub, gpus, archs)
        .args(args![
            "build",
            spec,
            "--python",
            python(),
            "--json",
            "--quiet"
        ])
        .output()
        .unwrap();
    assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn builds(cache: &Cache) -> u64 {
    u64_of(&cache.stats(), "builds")
}

#[test]
fn an_entry_for_8_0_and_9_0_serves_9_0_and_8_6_machines_with_no_compile() {
    let stub = stub_nvidia_smi();
    let stub = stub.path();
    let work = tempfile::tempdir().unwrap();
    let spec = spec_without_archs(work.path());
    let ci = Cache::new();
    let remote_dir = tempfile::tempdir().unwrap();
    let remote = format!("file://{}", remote_dir.path().display());

    // The shared entry: built once, for an arch list chosen explicitly, and
    // uploaded to a `file://` remote.
    let out = with_gpus(&ci, stub, "9.0", Some("8.0 9.0"))
        .env("ABICACHE_REMOTE", &remote)
        .args(args![
            "build",
            &spec,
            "--python",
            python(),
            "--json",
            "--quiet"
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let wide: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(wide["hit"], false, "{wide}");
    assert!(wide.get("covered_by").is_none(), "{wide}");
    assert_eq!(builds(&ci), 1);

    // No arch list: a 9.0 machine's key is `sm_90` only, and misses; the
    // `8.0 9.0` entry covers it, with 0 compiles.
    for (gpus, image) in [("9.0", "sm_90"), ("8.6", "sm_80")] {
        let served = build(&ci, stub, &spec, gpus, None);
        assert_eq!(served["hit"], true, "{gpus}: {served}");
        assert_ne!(served["key"], wide["key"], "{gpus}: its own key differs");
        assert_eq!(served["path"], wide["path"], "{gpus}: {served}");
        assert_eq!(strings(&served["compiled"]), Vec::<String>::new());
        let covered = &served["covered_by"];
        assert_eq!(covered["key"], wide["key"], "{served}");
        assert_eq!(covered["gpus"][0]["capability"], gpus);
        assert_eq!(covered["gpus"][0]["image"], image, "{served}");
        assert_eq!(covered["gpus"][0]["jit"], false, "{served}");
    }
    // Again on 8.6: the key memo now answers the key without a scan, and
    // the warm path covers too.
    let warm = build(&ci, stub, &spec, "8.6", None);
    assert_eq!(warm["covered_by"]["key"], wide["key"], "{warm}");
    assert_eq!(warm["path"], wide["path"], "{warm}");
    // Two GPUs, each served by its own image.
    let both = build(&ci, stub, &spec, "8.6 9.0", None);
    assert_eq!(both["covered_by"]["key"], wide["key"], "{both}");
    assert_eq!(builds(&ci), 1, "{}", ci.stats());

    // `explain` names the covering entry and why.
    let explained = with_gpus(&ci, stub, "8.6", None)
        .args(args!["explain", &spec, "--python", python()])
        .output()
        .unwrap();
    assert_success(&explained);
    let text = stdout(&explained);
    assert!(
        text.contains(&format!(
            "covered (the arch list came from the visible GPUs, so a build would serve this \
             instead of compiling): entry `{}` (sm_80 sm_90) covers the visible GPUs: GPU 8.6 \
             runs its sm_80 (SASS)",
            wide["key"].as_str().unwrap()
        )),
        "{text}"
    );

    // Through a read-only layer (a CI cache): a layer hit, nothing built.
    let local = Cache::new();
    let out = with_gpus(&local, stub, "9.0", None)
        .env("ABICACHE_READONLY_DIRS", &ci.dir)
        .args(args![
            "build",
            &spec,
            "--python",
            python(),
            "--json",
            "--quiet"
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let layered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(layered["layer"], true, "{layered}");
    assert_eq!(layered["path"], wide["path"], "served in place");
    assert_eq!(layered["covered_by"]["key"], wide["key"], "{layered}");
    let stats = local.stats();
    assert_eq!(
        (u64_of(&stats, "builds"), u64_of(&stats, "layer_hits")),
        (0, 1),
        "{stats}"
    );

    // Through the remote: downloaded under its own key, nothing built.
    let fresh = Cache::new();
    let out = with_gpus(&fresh, stub, "8.6", None)
        .env("ABICACHE_REMOTE", &remote)
        .args(args![
            "build",
            &spec,
            "--python",
            python(),
            "--json",
            "--quiet"
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let pulled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pulled["remote"], true, "{pulled}");
    assert_eq!(pulled["covered_by"]["key"], wide["key"], "{pulled}");
    assert_eq!(strings(&pulled["compiled"]), Vec::<String>::new());
    let stats = fresh.stats();
    assert_eq!(
        (u64_of(&stats, "builds"), u64_of(&stats, "remote_hits")),
        (0, 1),
        "{stats}"
    );
    // Published locally under its own key: next time a local covering hit.
    let local_now = build(&fresh, stub, &spec, "8.6", None);
    assert_eq!(local_now["covered_by"]["key"], wide["key"], "{local_now}");
    assert_eq!(local_now.get("remote"), None, "{local_now}");

    // A 10.0 machine: nothing covers it (sm_80/sm_90 SASS, no PTX): it builds.
    let blackwell = build(&ci, stub, &spec, "10.0", None);
    assert_eq!(blackwell["hit"], false, "{blackwell}");
    assert!(blackwell.get("covered_by").is_none(), "{blackwell}");
    assert_eq!(builds(&ci), 2);

    // An explicit arch list stays exact: `9.0` builds its own entry.
    let exact = build(&ci, stub, &spec, "9.0", Some("9.0"));
    assert_eq!(exact["hit"], false, "{exact}");
    assert!(exact.get("covered_by").is_none(), "{exact}");
    assert_ne!(exact["path"], wide["path"]);
    assert_eq!(builds(&ci), 3);
    // It is the 9.0 machine's exact key: served as such from now on.
    let again = build(&ci, stub, &spec, "9.0", None);
    assert_eq!(again["path"], exact["path"], "{again}");
    assert!(again.get("covered_by").is_none(), "{again}");
}
