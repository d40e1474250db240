//! Real compiles against the venv's torch (the checkout's `.venv`, made by `scripts/setup-venv.sh`),
//! plus flag and error snapshots that need no torch.

use std::path::{Path, PathBuf};
use std::process::Command;

use abicache_build::{
    build, flags, parse_max_jobs, plain_line, progress_json, BuildError, BuildOptions, BuildPlan,
    Nvcc, Progress, Tool, Toolchain, ToolchainEnv, Unit,
};

/// `<workspace>/.venv/lib/python3.*/site-packages`, if the venv exists.
fn site_packages() -> Option<PathBuf> {
    let lib = abicache_test_support::repo_root().join(".venv/lib");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.join("torch").join("include").is_dir())
        .collect();
    dirs.sort();
    dirs.pop().map(|p| p.canonicalize().unwrap())
}

use abicache_test_support::{skip, venv_python};

fn host_toolchain() -> Toolchain {
    Toolchain::discover(&ToolchainEnv::from_process(), &[], false).expect("a host C++ compiler")
}

fn unit(source: &Path, display: &str, hash: &str) -> Unit {
    Unit {
        source: source.to_path_buf(),
        files: vec![(display.to_string(), hash.to_string())],
        uses_extension_name: false,
    }
}

fn cpu_plan(name: &str, torch_dir: &Path, sources: Vec<Unit>) -> BuildPlan {
    BuildPlan {
        name: name.to_string(),
        sources,
        cxx11_abi: true,
        torch_dir: torch_dir.to_path_buf(),
        abi_fields: "python_abi=agnostic\ntorch=2.15.0\ncxx11_abi=1\n".into(),
        ..Default::default()
    }
}

const UNIT_A: &str = r#"#include <torch/library.h>
#include <cstdint>
int64_t twice(int64_t x) { return 2 * x; }
TORCH_LIBRARY(abicache_build_t, m) { m.def("twice(int x) -> int", &twice); }
"#;

const UNIT_B: &str = r#"#include <torch/library.h>
#include <cstdint>
int64_t add_one(int64_t x) { return x + 1; }
TORCH_LIBRARY_FRAGMENT(abicache_build_t, m) { m.def("add_one(int x) -> int", &add_one); }
"#;

fn quiet() -> impl Fn(Progress) {
    |_| {}
}

/// One story, to keep real compiles few: build two units, rebuild (all cached), change one
/// unit's hash (exactly one recompiles), link a second plan sharing a unit (no compile).
#[test]
fn cpu_extension_builds_then_reuses_objects_per_unit() {
    let Some(sp) = site_packages() else {
        return skip("no venv with torch at the checkout's `.venv`; run scripts/setup-venv.sh");
    };
    let torch = sp.join("torch");
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.cpp"), UNIT_A).unwrap();
    std::fs::write(src.join("b.cpp"), UNIT_B).unwrap();
    let objects = t.path().join("objects");
    let tc = host_toolchain();
    let opts = BuildOptions {
        jobs: Some(2),
        previous_seconds: Some(1.5),
        ..Default::default()
    };

    let plan = cpu_plan(
        "abicache_build_t",
        &torch,
        vec![
            unit(&src.join("a.cpp"), "src/a.cpp", "h-a"),
            unit(&src.join("b.cpp"), "src/b.cpp", "h-b1"),
        ],
    );
    let events = std::cell::RefCell::new(Vec::new());
    let record = |e: Progress| events.borrow_mut().push(e);
    let out1 = t.path().join("out1");
    let r = build(&plan, &tc, &objects, &out1, &opts, &record).unwrap();
    assert_eq!(r.units_total, 2);
    assert_eq!(r.units_cached, 0);
    let mut compiled = r.units_compiled.clone();
    compiled.sort();
    assert_eq!(compiled, ["src/a.cpp", "src/b.cpp"]);
    assert_eq!(r.library, out1.join("abicache_build_t.so"));
    assert!(r.library.is_file());
    assert_eq!(r.toolchain["cxx_version"], tc.cxx.version);
    let events = events.into_inner();
    assert_eq!(
        events.first(),
        Some(&Progress::Started {
            name: "abicache_build_t".into(),
            total: 2,
            cached: 0,
            estimate: Some(1.5),
            memory_bound: None,
        })
    );
    assert!(matches!(
        events[1],
        Progress::UnitDone {
            done: 1,
            total: 2,
            ..
        }
    ));
    assert!(matches!(
        events[2],
        Progress::UnitDone {
            done: 2,
            total: 2,
            ..
        }
    ));
    assert_eq!(events[3], Progress::Linking);
    assert!(matches!(events[4], Progress::Finished { .. }));
    assert_eq!(events.len(), 5);

    // compile_commands.json: one entry per unit, with the real argv.
    let cc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out1.join("compile_commands.json")).unwrap())
            .unwrap();
    let entries = cc.as_array().unwrap();
    assert_eq!(entries.len(), 2);
    for (entry, name) in entries.iter().zip(["a.cpp", "b.cpp"]) {
        assert_eq!(entry["file"], src.join(name).display().to_string());
        let output = entry["output"].as_str().unwrap();
        assert!(Path::new(output).is_file(), "{output} exists");
        assert!(output.starts_with(objects.to_str().unwrap()));
        let args: Vec<&str> = entry["arguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[args.len() - 2..], ["-o", output]);
        assert!(args.contains(&"-DTORCH_EXTENSION_NAME=abicache_build_t"));
        assert!(entry["directory"].is_string());
    }

    // The library really registers its ops with torch.
    let check = Command::new(venv_python(".venv"))
        .args(["-c", "import sys, torch; torch.ops.load_library(sys.argv[1]); \
                      print(torch.ops.abicache_build_t.twice(21), torch.ops.abicache_build_t.add_one(1))"])
        .arg(&r.library)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&check.stdout).trim(),
        "42 2",
        "stderr: {}",
        String::from_utf8_lossy(&check.stderr)
    );

    // Every later build shares the object cache; each links into its own dir.
    let rebuild = |plan: &BuildPlan, out: &str| {
        build(plan, &tc, &objects, &t.path().join(out), &opts, &quiet()).unwrap()
    };

    // Same plan again: nothing compiles, and the reused objects' records are
    // touched (the store's gc evicts objects least recently used first).
    let epoch = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    let object_files: Vec<_> = std::fs::read_dir(&objects)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for path in &object_files {
        let file = std::fs::File::options().append(true).open(path).unwrap();
        file.set_modified(epoch).unwrap();
    }
    let r = rebuild(&plan, "out2");
    assert_eq!((r.units_cached, r.units_compiled.len()), (2, 0));
    let records = object_files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"));
    assert_eq!(records.clone().count(), 2);
    for path in records {
        let modified = std::fs::metadata(path).unwrap().modified().unwrap();
        assert!(
            modified > epoch,
            "reused object `{}` was not touched",
            path.display()
        );
    }

    // One unit's files changed: exactly that unit recompiles.
    let mut changed = plan.clone();
    changed.sources[1].files[0].1 = "h-b2".into();
    let r = rebuild(&changed, "out3");
    assert_eq!(r.units_compiled, ["src/b.cpp"]);
    assert_eq!(r.units_cached, 1);

    // A second plan that shares unit a (same flags) reuses its object and only links.
    let mut second = plan.clone();
    second.sources.truncate(1);
    second.extra_ldflags = vec!["-Wl,--as-needed".into()];
    let r = rebuild(&second, "out4");
    assert_eq!((r.units_cached, r.units_compiled.len()), (1, 0));
    assert!(r.library.is_file());

    // Another extension (another name, so another -DTORCH_EXTENSION_NAME) shares
    // the object of a unit that does not use TORCH_EXTENSION_NAME...
    let mut renamed = second.clone();
    renamed.name = "abicache_build_other".into();
    let r = rebuild(&renamed, "out6");
    assert_eq!((r.units_cached, r.units_compiled.len()), (1, 0));
    // ...but not of one that does: there the define can change the object.
    renamed.sources[0].uses_extension_name = true;
    let r = rebuild(&renamed, "out7");
    assert_eq!(r.units_compiled, ["src/a.cpp"]);

    // The ABI fields are part of every object key.
    let mut other_abi = second.clone();
    other_abi.abi_fields.push_str("python_abi=cpython-311\n");
    let r = rebuild(&other_abi, "out5");
    assert_eq!(r.units_compiled, ["src/a.cpp"]);
}

/// Filters the temp dir and the host compiler's path out of user-facing text.
fn filtered(text: &str, tmp: &Path, tc: &Toolchain) -> String {
    let text = text
        .replace(&tmp.display().to_string(), "[TMP]")
        .replace(&tc.cxx.path.display().to_string(), "[CXX]");
    // Object keys and temp-name counters vary between runs.
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.to_string();
        while let Some(pos) = l.find("[TMP]/objects/.") {
            let start = pos + "[TMP]/objects/".len();
            let end = l[start..]
                .find(".tmp.o")
                .map_or(l.len(), |e| start + e + ".tmp.o".len());
            l.replace_range(start..end, "[TEMP OBJECT]");
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

#[test]
fn syntax_error_reports_the_compilers_message_and_exact_command() {
    let t = tempfile::tempdir().unwrap();
    let tmp = t.path().canonicalize().unwrap();
    std::fs::write(
        tmp.join("bad.cpp"),
        "int ok = 1;\n#error abicache test: deliberately broken\n",
    )
    .unwrap();
    let std_env = ToolchainEnv {
        cxx: Some("c++".into()),
        ..ToolchainEnv::from_process()
    };
    let tc = Toolchain::discover(&std_env, &[], false).unwrap();
    let plan = cpu_plan(
        "bad_ext",
        &tmp.join("torch"),
        vec![unit(&tmp.join("bad.cpp"), "bad.cpp", "h")],
    );
    let err = build(
        &plan,
        &tc,
        &tmp.join("objects"),
        &tmp.join("out"),
        &BuildOptions::default(),
        &quiet(),
    )
    .unwrap_err();
    let BuildError::Compile {
        unit,
        command,
        output,
        ..
    } = &err
    else {
        panic!("not a compile error: {err}")
    };
    assert_eq!(unit, "bad.cpp");
    assert!(output.contains("error"), "{output}");
    assert!(command.contains("-c") && command.contains("bad.cpp"));
    // No temp object left behind, nothing published.
    let leftovers: Vec<_> = std::fs::read_dir(tmp.join("objects")).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(!tmp.join("out/bad_ext.so").exists());
    insta::assert_snapshot!("syntax_error", filtered(&err.to_string(), &tmp, &tc));
}

#[test]
fn first_failure_stops_scheduling_and_failure_is_reported_once() {
    let t = tempfile::tempdir().unwrap();
    let tmp = t.path();
    let mut sources = Vec::new();
    for i in 0..6 {
        let path = tmp.join(format!("bad{i}.c"));
        std::fs::write(&path, "#error deliberately broken\n").unwrap();
        sources.push(unit(&path, &format!("bad{i}.c"), "h"));
    }
    let plan = cpu_plan("many_bad", &tmp.join("torch"), sources);
    let events = std::cell::RefCell::new(0usize);
    let count = |_e: Progress| *events.borrow_mut() += 1;
    let opts = BuildOptions {
        jobs: Some(1),
        ..Default::default()
    };
    let err = build(
        &plan,
        &host_toolchain(),
        &tmp.join("objects"),
        &tmp.join("out"),
        &opts,
        &count,
    )
    .unwrap_err();
    let BuildError::Compile { unit, .. } = err else {
        panic!("{err}")
    };
    // With one job, the first unit fails and no other unit is started.
    assert_eq!(unit, "bad0.c");
    assert_eq!(events.into_inner(), 1, "only `Started` was reported");
}

#[test]
fn launcher_from_env_wraps_compiles() {
    let t = tempfile::tempdir().unwrap();
    let tmp = t.path().canonicalize().unwrap();
    let launcher = tmp.join("fake-ccache");
    let log = tmp.join("launcher.log");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(tmp.join("bad.c"), "int broken(;\n").unwrap();
    let env = ToolchainEnv {
        launcher: Some(launcher.display().to_string()),
        ..ToolchainEnv::from_process()
    };
    let tc = Toolchain::discover(&env, &[], false).unwrap();
    assert_eq!(tc.launcher.as_deref(), Some(launcher.as_path()));
    let plan = cpu_plan(
        "launched",
        &tmp.join("torch"),
        vec![unit(&tmp.join("bad.c"), "bad.c", "h")],
    );
    let err = build(
        &plan,
        &tc,
        &tmp.join("objects"),
        &tmp.join("out"),
        &BuildOptions::default(),
        &quiet(),
    )
    .unwrap_err();
    let BuildError::Compile { command, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        command.starts_with(&launcher.display().to_string()),
        "{command}"
    );
    assert!(std::fs::read_to_string(&log).unwrap().contains("bad.c"));

    let missing = ToolchainEnv {
        launcher: Some("no-such-launcher-xyz".into()),
        ..ToolchainEnv::from_process()
    };
    insta::assert_snapshot!(
        "launcher_not_found",
        Toolchain::discover(&missing, &[], false)
            .unwrap_err()
            .to_string()
    );
}

const CUDA_UNIT: &str = r#"#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" int abicache_scale(float* x, float a, int n) {
  scale<<<(n + 255) / 256, 256>>>(x, a, n);
  return static_cast<int>(cudaGetLastError());
}
"#;

#[test]
fn cuda_unit_compiles_with_pip_nvcc_and_links() {
    let Some(sp) = site_packages() else {
        return skip("no venv with torch at the checkout's `.venv`; run scripts/setup-venv.sh");
    };
    let env = ToolchainEnv {
        cuda_home: None,
        ..ToolchainEnv::from_process()
    };
    let tc = match Toolchain::discover(&env, std::slice::from_ref(&sp), true) {
        Ok(tc) => tc,
        Err(e @ BuildError::NvccNotFound { .. }) => return skip(&format!("CUDA test: {e}")),
        Err(e) => panic!("{e}"),
    };
    let nvcc = tc.nvcc.as_ref().unwrap();
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("k.cu"), CUDA_UNIT).unwrap();
    let mut plan = cpu_plan(
        "cuda_t",
        &sp.join("torch"),
        vec![unit(&t.path().join("k.cu"), "k.cu", "h")],
    );
    plan.requires_cuda = true;
    plan.cuda_include_dirs = nvcc.include_dirs.clone();
    plan.gencode = vec!["-gencode=arch=compute_90,code=sm_90".into()];
    plan.extra_cuda_cflags = vec!["--threads".into(), "2".into()];
    let objects = t.path().join("objects");
    let r = build(
        &plan,
        &tc,
        &objects,
        &t.path().join("out"),
        &BuildOptions::default(),
        &quiet(),
    )
    .unwrap();
    assert_eq!(r.units_compiled, ["k.cu"]);
    assert_eq!(r.toolchain["nvcc_version"], nvcc.release);
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&r.library)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&nm.stdout).contains("abicache_scale"));

    // nvcc scheduling flags do not change the object key.
    plan.extra_cuda_cflags = vec!["--threads=4".into()];
    let r = build(
        &plan,
        &tc,
        &objects,
        &t.path().join("out2"),
        &BuildOptions::default(),
        &quiet(),
    )
    .unwrap();
    assert_eq!((r.units_cached, r.units_compiled.len()), (1, 0));
}

#[test]
fn venv_pip_nvcc_is_discovered_with_its_wheel_layout() {
    let Some(sp) = site_packages() else {
        return skip("no venv with torch at the checkout's `.venv`; run scripts/setup-venv.sh");
    };
    let env = ToolchainEnv {
        cuda_home: None,
        path: Some("/nonexistent".into()),
        ..Default::default()
    };
    let nvcc = match abicache_build::find_nvcc(&env, std::slice::from_ref(&sp)) {
        Ok(n) => n,
        Err(e) => return skip(&format!("pip nvcc: {e}")),
    };
    assert_eq!(nvcc.origin, "pip wheel");
    assert!(nvcc.release.split('.').count() == 2, "{}", nvcc.release);
    let root = nvcc.tool.path.parent().unwrap().parent().unwrap();
    assert_eq!(nvcc.include_dirs[0], root.join("include"));
    assert!(nvcc
        .include_dirs
        .iter()
        .all(|d| d.starts_with(sp.join("nvidia"))));
    assert!(nvcc
        .lib_dir
        .as_ref()
        .unwrap()
        .starts_with(sp.join("nvidia")));
    assert!(nvcc.cudart_flag.starts_with("-l"));
}

/// A cu12-style wheel set (`nvidia/cuda_nvcc`, `nvidia/cuda_runtime`) with a fake nvcc.
#[test]
fn cu12_style_wheels_give_every_include_dir_and_the_versioned_cudart() {
    let t = tempfile::tempdir().unwrap();
    let nv = t.path().join("nvidia");
    for d in [
        "cuda_nvcc/bin",
        "cuda_nvcc/include",
        "cuda_runtime/include",
        "cuda_runtime/lib",
        "cublas/include",
    ] {
        std::fs::create_dir_all(nv.join(d)).unwrap();
    }
    let nvcc = nv.join("cuda_nvcc/bin/nvcc");
    std::fs::write(
        &nvcc,
        "#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(nv.join("cuda_runtime/lib/libcudart.so.12"), "").unwrap();
    let env = ToolchainEnv {
        path: Some(t.path().join("empty").into()),
        ..Default::default()
    };
    let found = abicache_build::find_nvcc(&env, &[t.path().to_path_buf()]).unwrap();
    assert_eq!(found.release, "12.8");
    assert_eq!(found.origin, "pip wheel");
    assert_eq!(
        found.include_dirs,
        [
            nv.join("cuda_nvcc/include"),
            nv.join("cublas/include"),
            nv.join("cuda_runtime/include")
        ]
    );
    assert_eq!(found.lib_dir, Some(nv.join("cuda_runtime/lib")));
    assert_eq!(found.cudart_flag, "-l:libcudart.so.12");
}

#[test]
fn toolchain_errors_name_what_was_searched_and_the_fix() {
    let t = tempfile::tempdir().unwrap();
    let tmp = t.path();
    let empty_path = Some(tmp.join("bin").into_os_string());
    let no_cxx = ToolchainEnv {
        path: empty_path.clone(),
        ..Default::default()
    };
    let e1 = abicache_build::find_cxx(&no_cxx).unwrap_err().to_string();
    let bad_cxx = ToolchainEnv {
        cxx: Some("/opt/nowhere/g++".into()),
        ..Default::default()
    };
    let e2 = abicache_build::find_cxx(&bad_cxx).unwrap_err().to_string();
    let no_nvcc = abicache_build::find_nvcc(&no_cxx, &[tmp.join("site-packages")])
        .unwrap_err()
        .to_string();
    let bad_home = ToolchainEnv {
        cuda_home: Some(tmp.join("cuda")),
        ..Default::default()
    };
    let e4 = abicache_build::find_nvcc(&bad_home, &[])
        .unwrap_err()
        .to_string();
    let text = [e1, e2, no_nvcc, e4]
        .join("\n---\n")
        .replace(&tmp.display().to_string(), "[TMP]");
    insta::assert_snapshot!("toolchain_errors", text);
}

#[test]
fn max_jobs_rejects_what_is_not_a_positive_number() {
    if !abicache_test_support::alone_in_process(
        "build::max_jobs_rejects_what_is_not_a_positive_number",
    ) {
        return;
    }
    assert_eq!(parse_max_jobs("8").unwrap(), 8);
    assert_eq!(parse_max_jobs(" 3 ").unwrap(), 3);
    let errors: Vec<String> = ["0", "-2", "four", "2.5", ""]
        .iter()
        .map(|v| parse_max_jobs(v).unwrap_err().to_string())
        .collect();
    insta::assert_snapshot!("max_jobs_errors", errors.join("\n---\n"));

    // Only this test touches `MAX_JOBS`, alone in its process (above).
    std::env::set_var("MAX_JOBS", "3");
    assert_eq!(BuildOptions::from_env().unwrap().jobs, Some(3));
    std::env::set_var("MAX_JOBS", "lots");
    assert!(
        matches!(BuildOptions::from_env(), Err(BuildError::MaxJobs { value }) if value == "lots")
    );
    std::env::remove_var("MAX_JOBS");
    assert_eq!(BuildOptions::from_env().unwrap().jobs, None);
}

fn fake_toolchain(cuda: bool) -> Toolchain {
    Toolchain {
        cxx: Tool {
            path: "/usr/bin/c++".into(),
            version: "c++ (Debian 12.2.0-14) 12.2.0".into(),
        },
        nvcc: cuda.then(|| Nvcc {
            tool: Tool {
                path: "/venv/site-packages/nvidia/cu13/bin/nvcc".into(),
                version: "release 13.2".into(),
            },
            release: "13.2".into(),
            origin: "pip wheel".into(),
            include_dirs: vec!["/venv/site-packages/nvidia/cu13/include".into()],
            lib_dir: Some("/venv/site-packages/nvidia/cu13/lib".into()),
            cudart_flag: "-l:libcudart.so.13".into(),
        }),
        ccbin: None,
        launcher: Some("/usr/bin/ccache".into()),
    }
}

fn fake_plan(cuda: bool) -> BuildPlan {
    let src = if cuda {
        "/proj/src/kernel.cu"
    } else {
        "/proj/src/op.cpp"
    };
    BuildPlan {
        name: "my_ext".into(),
        sources: vec![Unit {
            source: src.into(),
            files: vec![],
            uses_extension_name: false,
        }],
        requires_cuda: cuda,
        python_abi_dependent: !cuda,
        cxx11_abi: true,
        torch_dir: "/venv/site-packages/torch".into(),
        python_include: Some("/usr/include/python3.11".into()),
        cuda_include_dirs: if cuda {
            vec!["/venv/site-packages/nvidia/cu13/include".into()]
        } else {
            vec![]
        },
        extra_cflags: vec![
            " -O3 ".into(),
            "-DTORCH_TARGET_VERSION=0x020A000000000000".into(),
        ],
        extra_cuda_cflags: vec!["-O3".into(), "--threads".into(), "4".into()],
        extra_ldflags: vec!["-lm".into()],
        extra_include_paths: vec!["/proj/include".into()],
        gencode: if cuda {
            vec!["-gencode=arch=compute_90,code=sm_90".into()]
        } else {
            vec![]
        },
        abi_fields: String::new(),
        // Compiled relative to the root: `src/...`, `-Iinclude`, a prefix map.
        root: Some("/proj".into()),
        tvm_ffi: None,
    }
}

fn render_commands(cuda: bool) -> String {
    let (plan, tc) = (fake_plan(cuda), fake_toolchain(cuda));
    let unit = &plan.sources[0];
    let cmd = flags::compile_command(&plan, &tc, unit, Path::new("/objects/KEY.o")).unwrap();
    let link = flags::link_argv(
        &plan,
        &tc,
        &[PathBuf::from("/objects/KEY.o")],
        Path::new("/out/my_ext.so"),
    );
    format!(
        "compile:\n{}\n\nobject key argv:\n{}\n\nlink:\n{}\n",
        cmd.argv().join("\n"),
        cmd.key_argv().join("\n"),
        link.join("\n")
    )
}

#[test]
fn cpu_plan_flags_match_torch_cpp_extension() {
    insta::assert_snapshot!("flags_cpu", render_commands(false));
}

#[test]
fn cuda_plan_flags_match_torch_cpp_extension() {
    insta::assert_snapshot!("flags_cuda", render_commands(true));
}

fn progress_examples() -> [Progress; 4] {
    [
        Progress::Started {
            name: "ext".into(),
            total: 4,
            cached: 1,
            estimate: Some(12.34),
            memory_bound: None,
        },
        Progress::UnitDone {
            done: 2,
            total: 4,
            source: "src/a.cpp".into(),
            seconds: 3.06,
        },
        Progress::Linking,
        Progress::Finished { seconds: 5.0 },
    ]
}

#[test]
fn plain_progress_lines() {
    let lines = progress_examples()
        .iter()
        .map(plain_line)
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("progress_plain", lines);
}

/// The dicts Python progress callbacks get: `kind`, the variant's fields and
/// `line`, for every kind of event (these were built by hand in the binding).
#[test]
fn progress_json_is_tagged_by_kind_with_its_line() {
    let events: Vec<_> = progress_examples()
        .iter()
        .map(|e| progress_json(e).unwrap())
        .collect();
    insta::assert_json_snapshot!("progress_json", events);
}
