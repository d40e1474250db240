//! CUDA units compiled through nvcc's phase split: each architecture's device
//! code is reused across arch lists and checkouts, the fat-binary images equal
//! a one-shot nvcc build's (read with the pip `cuobjdump`), and what cannot be
//! split (`-rdc=true`) compiles in one step with the reason given. Real pip
//! nvcc 13.2, tiny kernels, no GPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use abicache_build::{build, BuildOptions, BuildPlan, BuildReport, Toolchain, ToolchainEnv, Unit};
use abicache_test_support::{skip, venv_python};

const UNIT_A: &str = r#"#include <cuda_runtime.h>
template <int N> __global__ void scale(float* x) {
  #pragma unroll
  for (int i = 0; i < N; ++i) x[threadIdx.x * N + i] *= 2.0f;
}
extern "C" int abicache_a(float* x) { scale<4><<<1, 32>>>(x); return (int)cudaGetLastError(); }
"#;

const UNIT_B: &str = r#"#include <cuda_runtime.h>
__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" int abicache_b(float* x) { add_one<<<1, 32>>>(x); return (int)cudaGetLastError(); }
"#;

/// The shared venv's site-packages (torch and the pip CUDA wheels), from the
/// checkout's `.venv` interpreter; `None` when it has no torch.
fn site_packages() -> Option<PathBuf> {
    let out = Command::new(venv_python(".venv"))
        .args([
            "-c",
            "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))",
        ])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// The pip `cuobjdump` (`nvidia-cuda-cuobjdump`, scripts/requirements-dev.txt).
fn cuobjdump() -> Option<PathBuf> {
    let out = Command::new(venv_python(".venv"))
        .args([
            "-c",
            "import sys, glob; print('\\n'.join(p for d in sys.path for p in glob.glob(d + '/nvidia/cu*/bin/cuobjdump')))",
        ])
        .output()
        .ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .next()
        .map(PathBuf::from)
}

fn plan(dir: &Path, sp: &Path, tc: &Toolchain, archs: &[&str]) -> BuildPlan {
    let unit = |name: &str| Unit {
        source: dir.join(name),
        files: vec![(name.to_string(), "h".to_string())],
        uses_extension_name: false,
    };
    BuildPlan {
        name: "devsteps".into(),
        sources: vec![unit("a.cu"), unit("b.cu")],
        cxx11_abi: true,
        torch_dir: sp.join("torch"),
        abi_fields: "python_abi=agnostic\n".into(),
        // Relocatable, as a session compiles: relative paths under the project.
        root: Some(dir.to_path_buf()),
        requires_cuda: true,
        cuda_include_dirs: tc.nvcc.as_ref().unwrap().include_dirs.clone(),
        gencode: archs
            .iter()
            .map(|a| format!("-gencode=arch=compute_{a},code=sm_{a}"))
            .collect(),
        ..Default::default()
    }
}

fn steps(report: &BuildReport) -> BTreeMap<&str, (usize, usize)> {
    report
        .device_steps
        .iter()
        .map(|(arch, s)| (arch.as_str(), (s.reused, s.compiled)))
        .collect()
}

/// The cubins embedded in `file`, as (architecture, BLAKE3) sorted: what
/// `cuobjdump -xelf all` extracts (file names carry the architecture).
fn images(cuobjdump: &Path, file: &Path, scratch: &Path) -> Vec<(String, String)> {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).unwrap();
    let listed = Command::new(cuobjdump)
        .args(["--list-elf", "--list-ptx"])
        .arg(file)
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let out = Command::new(cuobjdump)
        .args(["-xelf", "all"])
        .arg(file)
        .current_dir(scratch)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut found: Vec<(String, String)> = std::fs::read_dir(scratch)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let arch = name
                .split('.')
                .find(|p| p.starts_with("sm_"))
                .unwrap_or("?")
                .to_string();
            let bytes = std::fs::read(e.path()).unwrap();
            (arch, blake3::hash(&bytes).to_hex().to_string())
        })
        .collect();
    found.sort();
    found
}

/// Each unit compiled one-shot by nvcc with the exact command the build
/// used (from its compile_commands.json), into `dir`.
fn one_shot_objects(out_dir: &Path, dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(out_dir.join("compile_commands.json")).unwrap();
    let entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let mut argv: Vec<String> = entry["arguments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            let object = dir.join(format!("{i}.o"));
            *argv.last_mut().unwrap() = object.display().to_string();
            let out = Command::new(&argv[0])
                .args(&argv[1..])
                .current_dir(entry["directory"].as_str().unwrap())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            object
        })
        .collect()
}

/// One story, to keep real compiles few: `8.0`, then `8.0 9.0` (only the
/// `9.0` device steps compile), images equal one-shot nvcc's, the library
/// loads, a copy of the project elsewhere reuses every device step, and an
/// `-rdc=true` unit compiles in one step with the reason.
#[test]
fn device_steps_are_reused_per_architecture_across_arch_lists_and_checkouts() {
    let Some(sp) = site_packages() else {
        return skip("no torch in the checkout's `.venv`; run scripts/setup-venv.sh");
    };
    let env = ToolchainEnv {
        cuda_home: None,
        ..ToolchainEnv::from_process()
    };
    let tc = match Toolchain::discover(&env, std::slice::from_ref(&sp), true) {
        Ok(tc) => tc,
        Err(e) => return skip(&format!("CUDA test: {e}")),
    };
    let Some(cuobjdump) = cuobjdump() else {
        return skip("no pip cuobjdump in `.venv`; install scripts/requirements-dev.txt");
    };
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("a.cu"), UNIT_A).unwrap();
    std::fs::write(project.join("b.cu"), UNIT_B).unwrap();
    let objects = t.path().join("objects");
    let run = |dir: &Path, archs: &[&str], out: &str| {
        build(
            &plan(dir, &sp, &tc, archs),
            &tc,
            &objects,
            &t.path().join(out),
            &BuildOptions::default(),
            &|_| {},
        )
        .unwrap()
    };

    let first = run(&project, &["80"], "out80");
    assert_eq!(steps(&first), BTreeMap::from([("sm_80", (0, 2))]));
    assert!(first.one_shot.is_empty(), "{:?}", first.one_shot);

    let second = run(&project, &["80", "90"], "out8090");
    assert_eq!(
        second.units_compiled,
        ["a.cu", "b.cu"],
        "host objects compile"
    );
    assert_eq!(
        steps(&second),
        BTreeMap::from([("sm_80", (2, 0)), ("sm_90", (0, 2))]),
        "only the 9.0 device steps compile"
    );

    // Both libraries carry the images a one-shot nvcc build of the same commands does.
    for (report, out) in [(&first, "out80"), (&second, "out8090")] {
        let reference = one_shot_objects(&t.path().join(out), &t.path().join(format!("ref-{out}")));
        let mut expected: Vec<(String, String)> = reference
            .iter()
            .enumerate()
            .flat_map(|(i, o)| images(&cuobjdump, o, &t.path().join(format!("x-ref{i}"))))
            .collect();
        expected.sort();
        let got = images(&cuobjdump, &report.library, &t.path().join("x-lib"));
        assert_eq!(
            got, expected,
            "{out}: images differ from a one-shot nvcc build"
        );
        assert_eq!(got.len(), if out == "out80" { 2 } else { 4 });
        let load = Command::new(venv_python(".venv"))
            .args([
                "-c",
                "import ctypes, sys; ctypes.CDLL(sys.argv[1]).abicache_a",
            ])
            .arg(&report.library)
            .env(
                "LD_LIBRARY_PATH",
                tc.nvcc
                    .as_ref()
                    .unwrap()
                    .lib_dir
                    .clone()
                    .unwrap_or_default(),
            )
            .output()
            .unwrap();
        assert!(
            load.status.success(),
            "{out} does not load: {}",
            String::from_utf8_lossy(&load.stderr)
        );
    }

    // A second checkout (the project copied elsewhere) built for `9.0` alone:
    // its unit objects are new (another arch list), its device steps are not.
    let copy = t.path().join("elsewhere/checkout");
    std::fs::create_dir_all(&copy).unwrap();
    for name in ["a.cu", "b.cu"] {
        std::fs::copy(project.join(name), copy.join(name)).unwrap();
    }
    let third = run(&copy, &["90"], "out-copy");
    assert_eq!(third.units_compiled, ["a.cu", "b.cu"]);
    assert_eq!(steps(&third), BTreeMap::from([("sm_90", (2, 0))]));

    // Relocatable device code is not split: one step, and the reason.
    let mut rdc = plan(&project, &sp, &tc, &["80"]);
    rdc.name = "devsteps_rdc".into();
    rdc.sources.truncate(1);
    rdc.extra_cuda_cflags = vec!["-rdc=true".into()];
    let report = build(
        &rdc,
        &tc,
        &objects,
        &t.path().join("out-rdc"),
        &BuildOptions::default(),
        &|_| {},
    )
    .unwrap();
    assert_eq!(
        report.one_shot,
        ["a.cu: compiled in one step (relocatable device code, -rdc=true)"]
    );
    assert!(report.device_steps.is_empty());
}
