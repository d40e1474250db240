//! `host_cpu`: a flag that asks for the host's CPU keys on what it resolved
//! to; every other key stays as it was. Scan reports are built by hand.

use std::path::Path;

use abicache_key::{compute_key, Environment, ExtensionSpec, FieldChange, KeyError, Keyed};
use abicache_scan::{ScanReport, ScannedFile, SourceReport};
use abicache_test_support::environment::cpython312;

/// What `gcc -march=native` resolved to on a Zen 3 with AVX-512.
const ZEN: &str = "-march=znver3 -mavx512bf16 -mavx512f -mno-amx-tile -mtune=znver3";
/// Another machine's.
const SKX: &str = "-march=skylake-avx512 -mavx512f -mno-avx512bf16 -mtune=skylake-avx512";

fn env(host_cpu: Option<&str>) -> Environment {
    Environment {
        torch_cuda: Some("12.8".into()),
        nvcc_version: Some("12.8.93".into()),
        cuda_archs: Some("9.0".into()),
        host_cpu: host_cpu.map(Into::into),
        ..cpython312("2.10.0+cpu")
    }
}

fn scan(source: &str) -> ScanReport {
    ScanReport {
        sources: vec![SourceReport {
            source: source.into(),
            files: vec![ScannedFile {
                path: source.into(),
                blake3: blake3::hash(b"x").to_hex().as_str().into(),
            }],
            missing_includes: vec![],
            computed_includes: vec![],
            uses_extension_name: false,
        }],
        python_markers: vec![],
        torch_includes: vec![],
        stable_registrations: vec![],
    }
}

fn cpu(flags: &[&str]) -> ExtensionSpec {
    ExtensionSpec::new("ops", ["/p/ops.cpp"]).with_extra_cflags(flags.iter().copied())
}

fn cuda(flags: &[&str]) -> ExtensionSpec {
    ExtensionSpec::new("ops", ["/p/ops.cu"]).with_extra_cuda_cflags(flags.iter().copied())
}

fn keyed(spec: &ExtensionSpec, env: &Environment) -> Result<Keyed, KeyError> {
    let source = spec.sources[0].file_name().unwrap().to_str().unwrap();
    compute_key(spec, env, &scan(source), Path::new("/p"))
}

fn host_cpu_line(k: &Keyed) -> Option<String> {
    k.payload.get("host_cpu").map(str::to_owned)
}

#[test]
fn every_spelling_of_a_native_flag_keys_on_the_resolved_cpu() {
    let spellings: Vec<ExtensionSpec> = vec![
        cpu(&["-O3", "-march=native"]),
        cpu(&["-mcpu=native"]),
        cpu(&["-mtune=native"]),
        cpu(&["-march", "native"]),
        cpu(&["-mtune", "native"]),
        cpu(&["-mcpu", "native", "-fopenmp"]),
        cuda(&["-Xcompiler", "-march=native"]),
        cuda(&["-Xcompiler=-march=native"]),
        cuda(&["--compiler-options", "-fPIC,-mtune=native"]),
        cuda(&["--compiler-options=-mcpu=native"]),
        cuda(&["-O3", "-Xcompiler", "-march", "-Xcompiler", "native"]),
    ];
    for spec in &spellings {
        let here = keyed(spec, &env(Some(ZEN))).unwrap();
        assert_eq!(host_cpu_line(&here).as_deref(), Some(ZEN), "{:?}", spec);
        // A described CPU gives another key.
        let there = keyed(spec, &env(Some(SKX))).unwrap();
        assert_ne!(here.key, there.key, "{:?}", spec);
        assert_eq!(
            here.payload.diff(&there.payload),
            [FieldChange::Changed {
                field: "host_cpu".into(),
                old: ZEN.into(),
                new: SKX.into(),
            }],
            "explain names the field"
        );
        assert_eq!(
            here.payload.diff(&there.payload)[0].to_string(),
            "host_cpu (the CPU `-march=native` resolved to): -march=znver3 -mavx512bf16 \
             -mno-amx-tile -mtune=znver3 -> -march=skylake-avx512 -mno-avx512bf16 -mtune=skylake-avx512"
        );
        // Objects never cross CPUs either.
        assert!(here.abi_fields().contains(&format!("host_cpu={ZEN}\n")));
        // Without a value the key cannot be made (the façade probes one).
        let err = keyed(spec, &env(None)).unwrap_err();
        assert!(matches!(err, KeyError::MissingHostCpu { .. }), "{err}");
    }
    insta::assert_snapshot!(
        keyed(&cpu(&["-march=native"]), &env(None)).unwrap_err().to_string(),
        @"extension `ops` is compiled with `-march=native`, so its key needs the target options that flag resolves to (`host_cpu`), and the environment has none: set `host_cpu` in the environment file to the value `abicache key` shows on the target machine, or key it through a session (`abicache key --python`, the Python package), which probes this machine's compiler"
    );
}

#[test]
fn a_key_without_a_native_flag_has_no_host_cpu_and_ignores_it() {
    let specs = [
        cpu(&["-O3", "-march=znver3", "-mavx512bf16"]),
        cpu(&["-march=nativex", "-DMODE=native"]),
        // nvcc's own flags, and host flags of a CUDA extension given to nvcc directly.
        cuda(&["-arch=native", "-march=native"]),
        // A CPU extension's CUDA flags are not used.
        cpu(&[]).with_extra_cuda_cflags(["-Xcompiler", "-march=native"]),
    ];
    for spec in &specs {
        let without = keyed(spec, &env(None)).unwrap();
        let with = keyed(spec, &env(Some(ZEN))).unwrap();
        assert_eq!(host_cpu_line(&without), None, "{spec:?}");
        assert_eq!(
            without.key, with.key,
            "{spec:?}: host_cpu must not change this key"
        );
        assert!(!without.abi_fields().contains("host_cpu"));
    }
}

#[test]
fn the_host_cpu_line_follows_cxx11_abi() {
    let k = keyed(&cpu(&["-march=native"]), &env(Some(ZEN))).unwrap();
    let lines = k.payload.lines();
    let at = lines
        .iter()
        .position(|l| l.starts_with("host_cpu="))
        .unwrap();
    assert_eq!(lines[at - 1], "cxx11_abi=1");
    assert_eq!(lines[at + 1], "source=ops.cpp");
}
