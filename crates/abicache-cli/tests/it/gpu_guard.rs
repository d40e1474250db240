//! Issue 48: a CUDA library's device code is recorded at publish, checked
//! against its nvcc flags, shown by `audit` and `explain`, and compared with
//! the visible GPUs before it is used.
//!
//! There is no GPU on the machines these tests run on: an `nvidia-smi` stub
//! first on `PATH` stands in for one (printing the GPU it pretends to be),
//! and `ABICACHE_TEST_ONLY_NO_NVML=1` keeps NVML out of it, so a machine
//! with a real GPU runs the same test. One CUDA build (the example for
//! `8.0`, ~1 min) serves every check but the publish one.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{assert_exit, assert_success, python, repo_path, stderr, stdout, strings, Cache};

/// The CUDA example, built for `archs`, in its own directory next to the cache.
fn cuda_project(cache: &Cache, dir_name: &str, archs: &str) -> PathBuf {
    let dir = cache.dir.with_file_name(dir_name);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["ops.cpp", "axpy_kernel.cu", "axpy.h"] {
        std::fs::copy(
            repo_path(&format!("examples/cuda_axpy/{file}")),
            dir.join(file),
        )
        .unwrap();
    }
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        format!(
            "[[extension]]\nname = \"cuda_axpy\"\nsources = [\"ops.cpp\", \"axpy_kernel.cu\"]\n\
             required_ops = [\"axpy\"]\ncuda_archs = \"{archs}\"\n"
        ),
    )
    .unwrap();
    spec
}

/// A directory holding an `nvidia-smi` stub that prints `gpus` (the
/// `index, name, compute_cap` lines of `--query-gpu`), or fails as it does
/// on a machine without a GPU when `gpus` is `None`. No GPU here: the stub
/// stands in for one.
fn gpu_stub(cache: &Cache, name: &str, gpus: Option<&str>) -> PathBuf {
    let dir = cache.dir.with_file_name(format!("stub-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let body = match gpus {
        Some(lines) => format!("#!/bin/sh\nprintf '%s\\n' '{lines}'\n"),
        None => "#!/bin/sh\necho 'NVIDIA-SMI has failed: no NVIDIA driver' >&2\nexit 9\n".into(),
    };
    let stub = dir.join("nvidia-smi");
    std::fs::write(&stub, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `abicache ARGS` with the stub in `stub_dir` first on `PATH` and NVML skipped.
fn run_with_gpu(cache: &Cache, stub_dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![stub_dir.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    cache
        .cmd(args)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("ABICACHE_TEST_ONLY_NO_NVML", "1")
        .output()
        .expect("run abicache")
}

fn build_args<'a>(spec: &'a Path, python: &'a Path) -> Vec<&'a std::ffi::OsStr> {
    vec![
        "build".as_ref(),
        spec.as_os_str(),
        "--python".as_ref(),
        python.as_os_str(),
        "--json".as_ref(),
        "--quiet".as_ref(),
    ]
}

#[test]
fn a_library_for_8_0_is_refused_on_a_stubbed_9_0_gpu_and_loads_on_8_6_and_without_a_gpu() {
    let cache = Cache::new();
    let python = python();
    let spec = cuda_project(&cache, "sm80", "8.0");
    let args = build_args(&spec, &python);

    // No GPU (the stub fails as nvidia-smi does without a driver): no check.
    let none = gpu_stub(&cache, "none", None);
    let built = run_with_gpu(&cache, &none, &args);
    assert_success(&built);
    let built: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
    assert_eq!(built["hit"], false, "{built}");
    assert_eq!(strings(&built["device_images"]), ["sm_80"], "{built}");

    // The manifest records the images, and `audit` shows them.
    let entry = cache.ls().into_iter().next().expect("one entry");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            Path::new(built["path"].as_str().unwrap())
                .parent()
                .unwrap()
                .join("manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(strings(&manifest["device_images"]), ["sm_80"], "{entry}");
    let library = built["path"].as_str().unwrap();
    let audit = cache.run(["audit", library]);
    assert_success(&audit);
    assert!(
        stdout(&audit).contains("device code: sm_80"),
        "{}",
        stdout(&audit)
    );
    let audit_json = cache.json(["audit", library, "--json"]);
    assert_eq!(strings(&audit_json["device_images"]), ["sm_80"]);

    // A stubbed 9.0 GPU (an H100) can run none of it: exit 2, naming the
    // library's code, the GPU and the fix.
    let h100 = gpu_stub(&cache, "h100", Some("0, NVIDIA H100 80GB HBM3, 9.0"));
    let refused = run_with_gpu(&cache, &h100, &args);
    assert_exit(&refused, 2);
    let message = stderr(&refused);
    for part in [
        "cuda_axpy.so has device code for sm_80; GPU 0",
        "GPU 0 (NVIDIA H100 80GB HBM3, 9.0) can run none of it",
        "set TORCH_CUDA_ARCH_LIST=\"9.0\"",
        "then rebuild",
        "ABICACHE_GPU_CHECK=0",
    ] {
        assert!(message.contains(part), "{part:?} not in:\n{message}");
    }
    // `explain` shows the images and the guard's verdict.
    let explain = run_with_gpu(
        &cache,
        &h100,
        &[
            "explain".as_ref(),
            spec.as_os_str(),
            "--python".as_ref(),
            python.as_os_str(),
        ],
    );
    assert_success(&explain);
    let text = stdout(&explain);
    assert!(text.contains("device code: sm_80"), "{text}");
    assert!(
        text.contains("gpus: refused: cuda_axpy.so has device code for sm_80"),
        "{text}"
    );

    // The guard can be turned off; then it is the hit it was.
    let mut off = cache.cmd(&args);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![h100.clone()];
    paths.extend(std::env::split_paths(&path));
    let waived = off
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("ABICACHE_TEST_ONLY_NO_NVML", "1")
        .env("ABICACHE_GPU_CHECK", "0")
        .output()
        .unwrap();
    assert_success(&waived);

    // A stubbed 8.6 GPU (an A10) runs sm_80 SASS: the same library, a hit.
    let a10 = gpu_stub(&cache, "a10", Some("0, NVIDIA A10, 8.6"));
    let served = run_with_gpu(&cache, &a10, &args);
    assert_success(&served);
    let served: serde_json::Value = serde_json::from_slice(&served.stdout).unwrap();
    assert_eq!(served["hit"], true, "{served}");
    assert_eq!(served["key"], built["key"]);

    // Two GPUs, one served: the other is named; CUDA_VISIBLE_DEVICES=0 hides it.
    let mixed = gpu_stub(
        &cache,
        "mixed",
        Some("0, NVIDIA A100-SXM4-80GB, 8.0\n1, NVIDIA H100 80GB HBM3, 9.0"),
    );
    let refused = run_with_gpu(&cache, &mixed, &args);
    assert_exit(&refused, 2);
    let message = stderr(&refused);
    assert!(
        message.contains("GPU 1 (NVIDIA H100 80GB HBM3, 9.0) can run none of it")
            && message.contains("TORCH_CUDA_ARCH_LIST=\"8.0 9.0\""),
        "{message}"
    );
    let mut one = cache.cmd(&args);
    let mut paths = vec![mixed];
    paths.extend(std::env::split_paths(&path));
    let first_only = one
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("ABICACHE_TEST_ONLY_NO_NVML", "1")
        .env("CUDA_VISIBLE_DEVICES", "0")
        .output()
        .unwrap();
    assert_success(&first_only);
}

#[test]
fn publish_refuses_a_library_whose_device_code_differs_from_its_flags() {
    // `NVCC_APPEND_FLAGS` adds an arch behind the arch parser's back: nvcc
    // reads it, the key and the flags abicache passes do not name it. No
    // GPU is needed (nor stubbed): the check is at publish.
    let cache = Cache::new();
    let spec = cuda_project(&cache, "appended", "8.0");
    let out = cache
        .cmd(build_args(&spec, &python()))
        .env("NVCC_APPEND_FLAGS", "-gencode=arch=compute_86,code=sm_86")
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let message = stderr(&out);
    assert!(
        message.contains(
            "refusing to publish `cuda_axpy`: its library carries device code for sm_80, sm_86, \
             but its nvcc flags ask for sm_80"
        ),
        "{message}"
    );
    assert!(message.contains("NVCC_APPEND_FLAGS"), "{message}");
    assert!(cache.ls().is_empty(), "nothing is published");
    // Without the variable the unit is compiled again (nvcc's variables are
    // in the object key): no stale object keeps the library refused.
    let again = cache.run(build_args(&spec, &python()));
    assert_success(&again);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(strings(&again["device_images"]), ["sm_80"], "{again}");
    assert!(
        strings(&again["compiled"]).contains(&"axpy_kernel.cu".to_owned()),
        "{again}"
    );
}
