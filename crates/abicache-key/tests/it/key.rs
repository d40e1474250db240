//! The key rules of docs/key.md, steps 3–4, each pinned by a test that fails when the
//! rule is dropped. Scan reports are built by hand (the scanner has its own tests).

use std::path::Path;

use abicache_key::{
    compute_key, Environment, ExtensionKind, ExtensionSpec, FieldChange, KeyError, Keyed, Payload,
    PythonAbiReason, StableTarget,
};
use abicache_scan::{
    ComputedInclude, Location, PythonMarker, ScanReport, ScannedFile, SourceReport, TorchInclude,
};
use abicache_test_support::environment::cpython312;

const ROOT: &str = "/project";

fn env(python: &str, soabi: Option<&str>, abiflags: Option<&str>, torch: &str) -> Environment {
    Environment {
        python_version: python.into(),
        python_soabi: soabi.map(Into::into),
        python_abiflags: abiflags.map(Into::into),
        torch_dir: Some("/venv/lib/python3.12/site-packages/torch".into()),
        python_include: Some("/usr/include/python3.12".into()),
        ..cpython312(torch)
    }
}

fn py312() -> Environment {
    env(
        "3.12.9",
        Some("cpython-312-x86_64-linux-gnu"),
        Some(""),
        "2.10.0+cpu",
    )
}

fn cuda_env(torch: &str, torch_cuda: &str) -> Environment {
    Environment {
        torch_cuda: Some(torch_cuda.into()),
        nvcc_version: Some("12.8.93".into()),
        cuda_archs: Some("8.0;9.0+PTX".into()),
        ..env(
            "3.12.9",
            Some("cpython-312-x86_64-linux-gnu"),
            Some(""),
            torch,
        )
    }
}

fn file(path: &str, content: &str) -> ScannedFile {
    ScannedFile {
        path: path.into(),
        blake3: blake3::hash(content.as_bytes()).to_hex().as_str().into(),
    }
}

/// One source `csrc/kernel.cpp` (or `.cu`) that includes `csrc/kernel.h`.
fn scan_of(source: &str) -> ScanReport {
    ScanReport {
        sources: vec![SourceReport {
            source: source.into(),
            files: vec![file(source, "kernel"), file("csrc/kernel.h", "header")],
            missing_includes: vec![],
            computed_includes: vec![],
            uses_extension_name: false,
        }],
        python_markers: vec![],
        torch_includes: vec![],
        stable_registrations: vec![],
    }
}

fn with_python_marker(mut scan: ScanReport) -> ScanReport {
    scan.python_markers.push(PythonMarker {
        file: "csrc/kernel.h".into(),
        line: 3,
        marker: "PyLong_FromLong".into(),
    });
    scan
}

fn cpu_spec() -> ExtensionSpec {
    ExtensionSpec::new("gemm", ["/project/csrc/kernel.cpp"])
}

fn cuda_spec() -> ExtensionSpec {
    ExtensionSpec::new("gemm", ["/project/csrc/kernel.cu"])
}

/// What the façade does: the spec's checks, then the key.
fn checked_key(
    spec: &ExtensionSpec,
    env: &Environment,
    scan: &ScanReport,
) -> Result<Keyed, KeyError> {
    spec.check_for(env)?;
    compute_key(spec, env, scan, Path::new(ROOT))
}

fn key(spec: &ExtensionSpec, env: &Environment, scan: &ScanReport) -> Keyed {
    checked_key(spec, env, scan).unwrap()
}

fn key_err(spec: &ExtensionSpec, env: &Environment, scan: &ScanReport) -> KeyError {
    checked_key(spec, env, scan).unwrap_err()
}

#[test]
fn key_is_128_bit_lower_hex_of_the_payload() {
    let k = key(&cpu_spec(), &py312(), &scan_of("csrc/kernel.cpp"));
    assert_eq!(k.key.len(), 32);
    assert!(k
        .key
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_eq!(
        k.key,
        blake3::hash(k.payload.text().as_bytes()).to_hex()[..32]
    );
    assert_eq!(k.payload.lines()[0], "format=1");
    assert!(k.payload.text().ends_with('\n'));
    let json = serde_json::to_value(&k).unwrap();
    assert_eq!(json["payload"][1], "name=gemm");
    assert_eq!(json["python_abi_reason"], "not_detected");
}

#[test]
fn python_agnostic_key_is_identical_across_python_310_312_313t() {
    let scan = scan_of("csrc/kernel.cpp");
    let envs = [
        env(
            "3.10.14",
            Some("cpython-310-x86_64-linux-gnu"),
            Some(""),
            "2.10.0+cpu",
        ),
        py312(),
        env(
            "3.13.1",
            Some("cpython-313t-x86_64-linux-gnu"),
            Some("t"),
            "2.10.0+cpu",
        ),
    ];
    let keys: Vec<Keyed> = envs.iter().map(|e| key(&cpu_spec(), e, &scan)).collect();
    assert!(keys.iter().all(|k| k.key == keys[0].key));
    assert_eq!(keys[0].python_abi, "agnostic");
    assert_eq!(keys[0].payload.get("python_abi"), Some("agnostic"));
    assert_eq!(keys[0].python_abi_reason, PythonAbiReason::NotDetected);
}

#[test]
fn python_dependent_key_is_the_soabi_and_free_threaded_differs() {
    let scan = with_python_marker(scan_of("csrc/kernel.cpp"));
    let gil = key(
        &cpu_spec(),
        &env(
            "3.13.1",
            Some("cpython-313-x86_64-linux-gnu"),
            Some(""),
            "2.10.0",
        ),
        &scan,
    );
    let ft = key(
        &cpu_spec(),
        &env(
            "3.13.1",
            Some("cpython-313t-x86_64-linux-gnu"),
            Some("t"),
            "2.10.0",
        ),
        &scan,
    );
    assert_eq!(gil.python_abi, "cpython-313-x86_64-linux-gnu");
    assert_eq!(
        ft.payload.get("python_abi"),
        Some("cpython-313t-x86_64-linux-gnu")
    );
    assert_eq!(gil.python_abi_reason, PythonAbiReason::Detected);
    assert_ne!(gil.key, ft.key);
    let py312_key = key(
        &cpu_spec(),
        &env(
            "3.12.9",
            Some("cpython-312-x86_64-linux-gnu"),
            Some(""),
            "2.10.0",
        ),
        &scan,
    );
    assert_ne!(gil.key, py312_key.key);
}

#[test]
fn soabi_absent_falls_back_to_version_and_abiflags() {
    let scan = with_python_marker(scan_of("csrc/kernel.cpp"));
    let ft = key(
        &cpu_spec(),
        &env("3.13.1", None, Some("t"), "2.10.0"),
        &scan,
    );
    assert_eq!(ft.python_abi, "cpython-3.13t");
    let gil = key(&cpu_spec(), &env("3.13.1", None, Some(""), "2.10.0"), &scan);
    assert_eq!(gil.python_abi, "cpython-3.13");
    assert_ne!(ft.key, gil.key);
    // Windows: no abiflags at all.
    let win = key(&cpu_spec(), &env("3.12.9", None, None, "2.10.0"), &scan);
    assert_eq!(win.python_abi, "cpython-3.12");
    assert!(matches!(
        compute_key(
            &cpu_spec(),
            &env("three", None, None, "2.10.0"),
            &scan,
            Path::new(ROOT)
        ),
        Err(KeyError::InvalidPythonVersion { .. })
    ));
}

#[test]
fn is_python_module_forces_python_abi_dependence() {
    let scan = scan_of("csrc/kernel.cpp");
    let spec = cpu_spec()
        .with_is_python_module(true)
        .with_python_abi_dependent(Some(false));
    let k = key(&spec, &py312(), &scan);
    assert!(k.python_abi_dependent);
    assert_eq!(k.python_abi_reason, PythonAbiReason::PythonModule);
    assert_eq!(k.python_abi, "cpython-312-x86_64-linux-gnu");
}

#[test]
fn explicit_python_abi_override_wins_over_detection_both_ways() {
    let marked = with_python_marker(scan_of("csrc/kernel.cpp"));
    let k = key(
        &cpu_spec().with_python_abi_dependent(Some(false)),
        &py312(),
        &marked,
    );
    assert_eq!(
        (k.python_abi.as_str(), k.python_abi_reason),
        ("agnostic", PythonAbiReason::Explicit)
    );
    let clean = scan_of("csrc/kernel.cpp");
    let k = key(
        &cpu_spec().with_python_abi_dependent(Some(true)),
        &py312(),
        &clean,
    );
    assert_eq!(k.python_abi, "cpython-312-x86_64-linux-gnu");
    assert_eq!(k.python_abi_reason, PythonAbiReason::Explicit);
}

#[test]
fn cpu_extension_reuses_binaries_across_accelerator_wheels_but_not_source_builds() {
    let scan = scan_of("csrc/kernel.cpp");
    let k = |torch: &str| key(&cpu_spec(), &env("3.12.9", None, Some(""), torch), &scan);
    let base = k("2.8.0");
    assert_eq!(base.payload.get("torch"), Some("2.8.0"));
    for wheel in ["2.8.0+cpu", "2.8.0+cu128", "2.8.0+rocm6.2", "2.8.0+xpu"] {
        assert_eq!(k(wheel).key, base.key, "{wheel}");
    }
    let git = k("2.8.0+gitabc1234");
    assert_eq!(git.torch_abi, "2.8.0+gitabc1234");
    assert_ne!(git.key, base.key);
    assert_ne!(k("2.9.0+cpu").key, base.key);
}

#[test]
fn cuda_extension_keys_on_the_full_torch_version_and_torch_cuda() {
    let scan = scan_of("csrc/kernel.cu");
    let a = key(&cuda_spec(), &cuda_env("2.8.0+cu128", "12.8"), &scan);
    assert_eq!(a.payload.get("torch"), Some("2.8.0+cu128"));
    assert_eq!(a.payload.get("torch_cuda"), Some("12.8"));
    let b = key(&cuda_spec(), &cuda_env("2.8.0+cu126", "12.6"), &scan);
    assert_ne!(a.key, b.key);
    let c = key(&cuda_spec(), &cuda_env("2.8.0+cu128", "12.9"), &scan);
    assert_ne!(a.key, c.key, "torch_cuda alone changes the key");
    // A CUDA extension needs no parse of the version; a CPU one does.
    let nightly = key(&cuda_spec(), &cuda_env("nightly", "12.8"), &scan);
    assert_eq!(nightly.torch_abi, "nightly");
    assert!(matches!(
        key_err(
            &cpu_spec(),
            &env("3.12.9", None, None, "nightly"),
            &scan_of("csrc/kernel.cpp")
        ),
        KeyError::InvalidTorchVersion { .. }
    ));
}

#[test]
fn torch_cuda_and_cuda_fields_appear_only_for_cuda_extensions() {
    let mut e = cuda_env("2.8.0+cu128", "12.8");
    let cpu = key(&cpu_spec(), &e, &scan_of("csrc/kernel.cpp"));
    for field in ["torch_cuda", "cuda_archs", "nvcc", "cuda_cflag"] {
        assert_eq!(cpu.payload.get(field), None, "{field}");
    }
    e.torch_cuda = Some("12.6".into());
    assert_eq!(
        key(&cpu_spec(), &e, &scan_of("csrc/kernel.cpp")).key,
        cpu.key
    );
    let cuda = key(&cuda_spec(), &e, &scan_of("csrc/kernel.cu"));
    assert_eq!(cuda.payload.get("torch_cuda"), Some("12.6"));
    assert_eq!(cuda.payload.get("nvcc"), Some("12.8"));
    // requires_cuda forced on a .cpp-only extension brings the CUDA fields, torch_cuda=none on a CPU wheel.
    let mut cpu_wheel = e.clone();
    cpu_wheel.torch_cuda = None;
    let forced = key(
        &cpu_spec().with_requires_cuda(Some(true)),
        &cpu_wheel,
        &scan_of("csrc/kernel.cpp"),
    );
    assert_eq!(forced.payload.get("torch_cuda"), Some("none"));
}

#[test]
fn cuda_arch_set_is_sorted_deduplicated_and_spec_wins_over_env() {
    let scan = scan_of("csrc/kernel.cu");
    let mut e = cuda_env("2.8.0+cu128", "12.8");
    e.cuda_archs = Some("9.0+PTX;8.0".into());
    let a = key(&cuda_spec(), &e, &scan);
    e.cuda_archs = Some("8.0 9.0+PTX 8.0".into());
    let b = key(&cuda_spec(), &e, &scan);
    assert_eq!(a.key, b.key);
    assert_eq!(
        a.payload.get("cuda_archs"),
        Some(
            "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=compute_90 \
             -gencode=arch=compute_90,code=sm_90"
        )
    );
    let spec = cuda_spec().with_cuda_archs(Some("12.0".into()));
    let c = key(&spec, &e, &scan);
    assert_eq!(c.gencode, ["-gencode=arch=compute_120,code=sm_120"]);
    // User arch flags replace torch's, as in torch.
    let own = cuda_spec().with_extra_cuda_cflags(["-gencode=arch=compute_90a,code=sm_90a"]);
    let d = key(&own, &e, &scan);
    assert!(d.gencode.is_empty());
    assert_eq!(
        d.payload.get("cuda_cflag"),
        Some("-gencode=arch=compute_90a,code=sm_90a")
    );
    e.cuda_archs = None;
    assert!(matches!(
        key_err(&cuda_spec(), &e, &scan),
        KeyError::NoCudaArchs { .. }
    ));
    e.cuda_archs = Some("8.0;Fermi".into());
    assert!(
        matches!(key_err(&cuda_spec(), &e, &scan), KeyError::InvalidCudaArch { ref entry, .. } if entry == "Fermi")
    );
}

#[test]
fn nvcc_major_minor_is_keyed_and_required_for_cuda() {
    let scan = scan_of("csrc/kernel.cu");
    let mut e = cuda_env("2.8.0+cu128", "12.8");
    let a = key(&cuda_spec(), &e, &scan);
    e.nvcc_version = Some("12.8.61".into());
    assert_eq!(
        key(&cuda_spec(), &e, &scan).key,
        a.key,
        "patch level does not matter"
    );
    e.nvcc_version = Some("12.9".into());
    assert_ne!(key(&cuda_spec(), &e, &scan).key, a.key);
    e.nvcc_version = None;
    assert!(matches!(
        key_err(&cuda_spec(), &e, &scan),
        KeyError::MissingNvcc { .. }
    ));
}

fn stable_scan(source: &str) -> ScanReport {
    let mut scan = scan_of(source);
    scan.torch_includes.push(TorchInclude {
        file: source.into(),
        line: 1,
        include: "torch/csrc/stable/library.h".into(),
        stable: true,
    });
    scan.torch_includes.push(TorchInclude {
        file: "csrc/kernel.h".into(),
        line: 2,
        include: "torch/headeronly/util/Half.h".into(),
        stable: true,
    });
    scan.stable_registrations.push(Location {
        file: source.into(),
        line: 9,
    });
    scan
}

#[test]
fn stable_target_replaces_torch_version_and_is_shared_across_torch_releases() {
    let spec = cuda_spec().with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
    let scan = stable_scan("csrc/kernel.cu");
    let a = key(&spec, &cuda_env("2.10.0+cu128", "12.8"), &scan);
    let b = key(&spec, &cuda_env("2.15.0+cu128", "12.8"), &scan);
    assert_eq!(a.key, b.key);
    assert_eq!(a.payload.get("torch_abi"), Some("stable-2.10"));
    assert_eq!(a.payload.get("torch"), None);
    assert_eq!(a.torch_abi, "stable-2.10");
    let define = "-DTORCH_TARGET_VERSION=0x020A000000000000";
    assert_eq!(a.host_flags.iter().filter(|f| *f == define).count(), 1);
    assert_eq!(a.cuda_flags.iter().filter(|f| *f == define).count(), 1);
    let lines = a.payload.lines();
    assert!(lines.contains(&format!("cflag={define}")));
    assert!(lines.contains(&format!("cuda_cflag={define}")));
    // A user flag with the same define is not doubled.
    let spec2 = spec
        .clone()
        .with_extra_cflags([define])
        .with_extra_cuda_cflags([define]);
    let c = key(&spec2, &cuda_env("2.10.0+cu128", "12.8"), &scan);
    assert_eq!(c.host_flags, [define]);
    assert_eq!(c.cuda_flags, [define]);
    assert_eq!(c.key, a.key);
    // And a different one is refused.
    let spec3 = spec.with_extra_cflags(["-DTORCH_TARGET_VERSION=0x0209000000000000"]);
    assert!(matches!(
        key_err(&spec3, &cuda_env("2.10.0+cu128", "12.8"), &scan),
        KeyError::ConflictingTargetDefine { .. }
    ));
}

#[test]
fn stable_target_2_16_encodes_0x0210() {
    let spec = cpu_spec().with_torch_stable_abi_target(Some(StableTarget::new(2, 16)));
    let k = key(
        &spec,
        &env("3.12.9", None, None, "2.16.0"),
        &stable_scan("csrc/kernel.cpp"),
    );
    assert_eq!(k.host_flags, ["-DTORCH_TARGET_VERSION=0x0210000000000000"]);
    assert_eq!(k.payload.get("torch_abi"), Some("stable-2.16"));
}

#[test]
fn stable_target_rejects_non_stable_header_reached_through_a_local_header() {
    let mut scan = stable_scan("csrc/kernel.cpp");
    scan.torch_includes.push(TorchInclude {
        file: "csrc/kernel.h".into(),
        line: 7,
        include: "ATen/core/Tensor.h".into(),
        stable: false,
    });
    let spec = cpu_spec().with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
    let e = key_err(&spec, &env("3.12.9", None, None, "2.10.0"), &scan);
    assert!(
        matches!(&e, KeyError::NonStableHeader { file, line: 7, include, .. } if file == "csrc/kernel.h" && include == "ATen/core/Tensor.h"),
        "{e:?}"
    );
    insta::assert_snapshot!("non_stable_header", e.to_string());
}

#[test]
fn stable_target_rejects_computed_includes() {
    let mut scan = stable_scan("csrc/kernel.cpp");
    scan.sources[0].computed_includes.push(ComputedInclude {
        file: "csrc/kernel.h".into(),
        line: 4,
        text: "KERNEL_IMPL".into(),
    });
    let spec = cpu_spec().with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
    let e = key_err(&spec, &env("3.12.9", None, None, "2.10.0"), &scan);
    insta::assert_snapshot!("computed_include_under_stable", e.to_string());
}

#[test]
fn runtime_floor_is_checked_before_anything_else() {
    // Bad header AND bad name AND old torch: the floor wins.
    let mut scan = stable_scan("csrc/kernel.cpp");
    scan.torch_includes.push(TorchInclude {
        file: "csrc/kernel.h".into(),
        line: 7,
        include: "c10/core/Scalar.h".into(),
        stable: false,
    });
    let spec = ExtensionSpec::new("bad-name", ["/project/csrc/kernel.cpp"])
        .with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
    let e = key_err(&spec, &env("3.12.9", None, None, "2.9.1+cu128"), &scan);
    assert!(matches!(e, KeyError::TorchBelowFloor { .. }), "{e:?}");
    insta::assert_snapshot!("torch_below_floor", e.to_string());
    let e = key_err(&spec, &env("3.12.9", None, None, "nightly"), &scan);
    assert!(matches!(e, KeyError::UnverifiableTorch { .. }), "{e:?}");
    insta::assert_snapshot!("unverifiable_torch", e.to_string());
    // Then the spec's names (`ExtensionSpec::check_for`, before any file is
    // read), then the headers the scan found (issue 15: the façade's order
    // wins over `compute_key`'s old one, which checked headers first).
    let e = key_err(&spec, &env("3.12.9", None, None, "2.10.0"), &scan);
    assert!(matches!(e, KeyError::InvalidName { .. }), "{e:?}");
    let good_name = ExtensionSpec::new("good_name", ["/project/csrc/kernel.cpp"])
        .with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
    let e = key_err(&good_name, &env("3.12.9", None, None, "2.10.0"), &scan);
    assert!(matches!(e, KeyError::NonStableHeader { .. }), "{e:?}");
}

#[test]
fn runtime_floor_accepts_the_target_and_newer() {
    let spec = cuda_spec().with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
    for torch in ["2.10.0", "2.15.0+cu130", "2.11.0a0+git1234abc", "3.0.0"] {
        key(
            &spec,
            &cuda_env(torch, "13.0"),
            &stable_scan("csrc/kernel.cu"),
        );
    }
}

#[test]
fn stable_looking_sources_without_explicit_target_stay_keyed_on_current_torch() {
    let scan = stable_scan("csrc/kernel.cpp");
    assert!(scan.stable_candidate());
    let a = key(&cpu_spec(), &env("3.12.9", None, None, "2.10.0"), &scan);
    let b = key(&cpu_spec(), &env("3.12.9", None, None, "2.11.0"), &scan);
    assert_eq!(a.payload.get("torch"), Some("2.10.0"));
    assert_eq!(a.payload.get("torch_abi"), None);
    assert!(
        a.host_flags.is_empty(),
        "no define without an explicit target"
    );
    assert_ne!(a.key, b.key);
}

#[test]
fn nvcc_scheduling_flags_do_not_change_the_key_but_are_kept_for_building() {
    let scan = scan_of("csrc/kernel.cu");
    let e = cuda_env("2.8.0+cu128", "12.8");
    let plain = key(&cuda_spec().with_extra_cuda_cflags(["-O3"]), &e, &scan);
    let sched =
        cuda_spec().with_extra_cuda_cflags(["--threads", "8", "-O3", "--split-compile=4", "-t2"]);
    let k = key(&sched, &e, &scan);
    assert_eq!(k.key, plain.key);
    assert_eq!(
        k.cuda_flags,
        ["--threads", "8", "-O3", "--split-compile=4", "-t2"]
    );
    let other = key(&cuda_spec().with_extra_cuda_cflags(["-O2"]), &e, &scan);
    assert_ne!(other.key, plain.key, "real nvcc flags are keyed");
}

#[test]
fn every_keyed_field_changes_the_key() {
    let scan = scan_of("csrc/kernel.cu");
    let e = cuda_env("2.8.0+cu128", "12.8");
    let base = key(&cuda_spec(), &e, &scan).key;
    let mut no_cxx11 = e.clone();
    no_cxx11.cxx11_abi = false;
    let mut missing = scan.clone();
    missing.sources[0]
        .missing_includes
        .push("csrc/kernel.cu:gen.h".into());
    let mut computed = scan.clone();
    computed.sources[0].computed_includes.push(ComputedInclude {
        file: "csrc/kernel.cu".into(),
        line: 3,
        text: "X".into(),
    });
    let mut edited = scan.clone();
    edited.sources[0].files[1] = file("csrc/kernel.h", "header v2");
    let variants = [
        key(&cuda_spec().with_namespace("ns"), &e, &scan),
        key(&cuda_spec().with_required_ops(["gemm::run"]), &e, &scan),
        key(&cuda_spec(), &no_cxx11, &scan),
        key(&cuda_spec(), &e, &missing),
        key(&cuda_spec(), &e, &computed),
        key(&cuda_spec(), &e, &edited),
        key(&cuda_spec().with_extra_cflags(["-O3"]), &e, &scan),
        key(&cuda_spec().with_extra_ldflags(["-lcublas"]), &e, &scan),
        key(
            &cuda_spec().with_extra_include_paths(["/project/include"]),
            &e,
            &scan,
        ),
    ];
    for (i, v) in variants.iter().enumerate() {
        assert_ne!(v.key, base, "variant {i}");
    }
}

#[test]
fn newline_in_a_flag_cannot_forge_another_field() {
    let scan = scan_of("csrc/kernel.cpp");
    let forged = key(
        &cpu_spec().with_extra_cflags(["-O2\ncflag=-O3"]),
        &py312(),
        &scan,
    );
    let honest = key(
        &cpu_spec().with_extra_cflags(["-O2", "-O3"]),
        &py312(),
        &scan,
    );
    assert_ne!(forged.key, honest.key);
    assert!(forged
        .payload
        .lines()
        .contains(&"cflag=-O2\\ncflag=-O3".to_string()));
}

#[test]
fn key_is_location_independent() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let mk = |root: &Path| {
        std::fs::create_dir_all(root.join("csrc/include")).unwrap();
        let spec = ExtensionSpec::new("gemm", [root.join("csrc/kernel.cpp")])
            .with_extra_include_paths([root.join("csrc/include"), "/opt/vendor/include".into()]);
        // The scanner reports root-relative display paths.
        compute_key(&spec, &py312(), &scan_of("csrc/kernel.cpp"), root).unwrap()
    };
    let (ka, kb) = (mk(a.path()), mk(b.path()));
    assert_eq!(ka.key, kb.key);
    let includes: Vec<String> = ka
        .payload
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("include_path="))
        .collect();
    assert_eq!(
        includes,
        [
            "include_path=csrc/include",
            "include_path=/opt/vendor/include"
        ]
    );
}

#[test]
fn invalid_name_is_rejected_by_the_spec_checks() {
    let spec = ExtensionSpec::new("my-ext", ["/project/csrc/kernel.cpp"]);
    let e = key_err(&spec, &py312(), &scan_of("csrc/kernel.cpp"));
    insta::assert_snapshot!("invalid_name", e.to_string());
}

#[test]
fn full_payload_snapshot() {
    let mut scan = stable_scan("csrc/kernel.cu");
    scan.sources.push(SourceReport {
        source: "csrc/bind.cpp".into(),
        files: vec![
            file("csrc/bind.cpp", "bind"),
            file("csrc/kernel.h", "header"),
        ],
        missing_includes: vec!["csrc/bind.cpp:generated/config.h".into()],
        computed_includes: vec![],
        uses_extension_name: false,
    });
    let spec = ExtensionSpec::new(
        "gemm",
        ["/project/csrc/kernel.cu", "/project/csrc/bind.cpp"],
    )
    .with_namespace("gemm_ops")
    .with_required_ops(["gemm_ops::mm", "gemm_ops::bmm"])
    .with_extra_cflags(["-O3"])
    .with_extra_cuda_cflags(["-O3", "--threads", "4", "--use_fast_math"])
    .with_extra_ldflags(["-lcublas"])
    .with_extra_include_paths(["/project/third_party/cutlass/include", "/opt/include"])
    .with_python_abi_dependent(Some(true))
    .with_torch_stable_abi_target(Some(StableTarget::new(2, 10)))
    .with_cuda_archs(Some("Hopper 8.0".into()));
    let k = key(&spec, &cuda_env("2.11.0+cu128", "12.8"), &scan);
    insta::assert_snapshot!(
        "full_payload",
        format!("key={}\n{}", k.key, k.payload.text())
    );
}

#[test]
fn diff_explains_a_miss_field_by_field() {
    let scan = scan_of("csrc/kernel.cu");
    let old = key(&cuda_spec(), &cuda_env("2.8.0+cu126", "12.6"), &scan);
    let mut scan2 = scan.clone();
    scan2.sources[0].files[1] = file("csrc/kernel.h", "header v2");
    scan2.sources[0].files.push(file("csrc/extra.h", "extra"));
    scan2.sources[0]
        .missing_includes
        .push("csrc/kernel.cu:gen.h".into());
    let new = key(
        &cuda_spec()
            .with_extra_cflags(["-O3"])
            .with_torch_stable_abi_target(Some(StableTarget::new(2, 8))),
        &cuda_env("2.8.0+cu128", "12.8"),
        &scan2,
    );
    let changes = old.payload.diff(&new.payload);
    assert!(changes.contains(&FieldChange::Changed {
        field: "torch_cuda".into(),
        old: "12.6".into(),
        new: "12.8".into()
    }));
    let text: Vec<String> = changes.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!("diff", text.join("\n"));
    assert!(old.payload.diff(&old.payload).is_empty());
    // A stored payload reads back to the same diff.
    let stored = Payload::parse(&old.payload.text()).unwrap();
    assert_eq!(stored.diff(&new.payload), changes);
}

#[test]
fn error_messages() {
    let scan = scan_of("csrc/kernel.cu");
    let mut e = cuda_env("2.8.0+cu128", "12.8");
    e.nvcc_version = None;
    let mut msgs = vec![key_err(&cuda_spec(), &e, &scan).to_string()];
    e.nvcc_version = Some("12.8".into());
    e.cuda_archs = None;
    msgs.push(key_err(&cuda_spec(), &e, &scan).to_string());
    e.cuda_archs = Some("8.0;sm_90".into());
    msgs.push(key_err(&cuda_spec(), &e, &scan).to_string());
    msgs.push(
        key_err(
            &cpu_spec(),
            &env("3.12.9", None, None, "nightly"),
            &scan_of("csrc/kernel.cpp"),
        )
        .to_string(),
    );
    let conflicting = cpu_spec()
        .with_torch_stable_abi_target(Some(StableTarget::new(2, 10)))
        .with_extra_cflags(["-DTORCH_TARGET_VERSION=0x0209000000000000"]);
    msgs.push(
        key_err(
            &conflicting,
            &env("3.12.9", None, None, "2.10.0"),
            &scan_of("csrc/kernel.cpp"),
        )
        .to_string(),
    );
    e.nvcc_version = Some("twelve".into());
    e.cuda_archs = Some("9.0".into());
    msgs.push(key_err(&cuda_spec(), &e, &scan).to_string());
    insta::assert_snapshot!("error_messages", msgs.join("\n\n"));
}

fn tvm_ffi_env(torch: &str, tvm_ffi_abi: &str) -> Environment {
    Environment {
        tvm_ffi_abi: Some(tvm_ffi_abi.into()),
        ..env(
            "3.12.9",
            Some("cpython-312-x86_64-linux-gnu"),
            Some(""),
            torch,
        )
    }
}

fn tvm_ffi_spec(source: &str) -> ExtensionSpec {
    ExtensionSpec::new("gemm", [format!("/project/{source}")]).with_kind(ExtensionKind::TvmFfi)
}

#[test]
fn a_tvm_ffi_module_without_torch_headers_is_keyed_by_the_tvm_ffi_abi_alone() {
    let scan = scan_of("csrc/kernel.cpp");
    let k = key(
        &tvm_ffi_spec("csrc/kernel.cpp"),
        &tvm_ffi_env("2.15.0+cu132", "0.1"),
        &scan,
    );
    assert_eq!(k.payload.get("tvm_ffi_abi"), Some("0.1"));
    assert_eq!(k.payload.get("python_abi"), Some("agnostic"));
    for field in ["torch", "torch_abi", "torch_cuda", "cxx11_abi"] {
        assert_eq!(k.payload.get(field), None, "{field}");
    }
    assert!(!k.uses_torch);
    assert_eq!(k.torch_abi, "none");
    assert!(k.abi_fields().contains("tvm_ffi_abi=0.1\n"));
    // Another torch release, another Python, a torch-less environment: one key.
    let mut py313 = tvm_ffi_env("none", "0.1");
    py313.python_version = "3.13.1".into();
    py313.python_soabi = Some("cpython-313-x86_64-linux-gnu".into());
    py313.cxx11_abi = false;
    for other in [tvm_ffi_env("2.12.1+cpu", "0.1"), py313] {
        assert_eq!(
            key(&tvm_ffi_spec("csrc/kernel.cpp"), &other, &scan).key,
            k.key
        );
    }
    // Another TVM-FFI C ABI: another key.
    let abi2 = key(
        &tvm_ffi_spec("csrc/kernel.cpp"),
        &tvm_ffi_env("2.15.0", "0.2"),
        &scan,
    );
    assert_ne!(abi2.key, k.key);
    // The same sources as a torch extension: torch's key, no TVM-FFI field.
    let torch = key(&cpu_spec(), &tvm_ffi_env("2.15.0", "0.1"), &scan);
    assert_eq!(torch.payload.get("tvm_ffi_abi"), None);
    assert_eq!(torch.payload.get("torch"), Some("2.15.0"));
}

#[test]
fn a_tvm_ffi_module_that_includes_a_torch_header_is_keyed_by_torch_as_before() {
    let mut scan = with_python_marker(scan_of("csrc/kernel.cpp"));
    scan.torch_includes.push(TorchInclude {
        file: "csrc/kernel.cpp".into(),
        line: 1,
        include: "torch/extension.h".into(),
        stable: false,
    });
    let env = tvm_ffi_env("2.15.0+cu132", "0.1");
    let tvm = key(&tvm_ffi_spec("csrc/kernel.cpp"), &env, &scan);
    let torch = key(&cpu_spec(), &env, &scan);
    assert!(tvm.uses_torch);
    for field in ["torch", "cxx11_abi", "python_abi"] {
        assert_eq!(tvm.payload.get(field), torch.payload.get(field), "{field}");
    }
    assert_eq!(
        tvm.payload.get("python_abi"),
        Some("cpython-312-x86_64-linux-gnu")
    );
    assert_eq!(tvm.payload.get("tvm_ffi_abi"), Some("0.1"));
}

#[test]
fn a_tvm_ffi_module_needs_the_environments_tvm_ffi_abi() {
    let err = key_err(
        &tvm_ffi_spec("csrc/kernel.cpp"),
        &py312(),
        &scan_of("csrc/kernel.cpp"),
    );
    assert!(matches!(err, KeyError::MissingTvmFfi { .. }), "{err}");
    assert!(
        err.to_string().contains("pip install apache-tvm-ffi"),
        "{err}"
    );
}
