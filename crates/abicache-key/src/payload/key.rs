//! The key of one extension for one environment: every ABI decision, the
//! payload written in the format of [`super::format`], and its hash.

use std::path::Path;
use std::sync::Arc;

use abicache_scan::ScanReport;
use serde::Serialize;

use super::format::{display_path, Payload, KEY_FORMAT};
use crate::arch;
use crate::env::Environment;
use crate::spec::{ExtensionKind, ExtensionSpec};
use crate::version::TorchVersion;
use crate::KeyError;

/// Why an extension is, or is not, keyed on the Python ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PythonAbiReason {
    /// `is_python_module = true` (a pybind11 module) always depends on it.
    PythonModule,
    /// `python_abi_dependent` was set explicitly.
    Explicit,
    /// The scan found Python-ABI markers (see `ScanReport::python_markers`).
    Detected,
    /// The scan found no marker.
    NotDetected,
}

/// A computed key with everything decided on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Keyed {
    /// Extension name.
    pub name: String,
    /// 32 lower-case hex digits (see [`Payload::key`]).
    pub key: String,
    /// The payload the key is the hash of (shared: a payload of thousands
    /// of files is a megabyte of text, and a session hands it to its cache
    /// writes on another thread rather than copying it).
    pub payload: Arc<Payload>,
    /// `agnostic`, or the SOABI (or its fallback) the binary is tied to.
    pub python_abi: String,
    /// `stable-M.m`, or the torch version the binary is keyed on; `none`
    /// for a TVM-FFI extension that includes no torch header.
    pub torch_abi: String,
    /// Whether the binary uses torch: every torch extension, and a TVM-FFI
    /// extension whose sources include a torch header (then it is built
    /// against torch and keyed by it as a torch extension is).
    pub uses_torch: bool,
    /// Whether the binary is tied to the Python ABI.
    pub python_abi_dependent: bool,
    /// Why [`python_abi_dependent`](Self::python_abi_dependent) has its value.
    pub python_abi_reason: PythonAbiReason,
    /// Host compiler flags to build with: `extra_cflags` plus the stable define.
    pub host_flags: Vec<String>,
    /// nvcc flags to build with: `extra_cuda_cflags` (scheduling flags
    /// included) plus the stable define.
    pub cuda_flags: Vec<String>,
    /// nvcc `-gencode` flags (CUDA only; empty when the user's own nvcc
    /// flags choose architectures, as torch does).
    pub gencode: Vec<String>,
}

impl ExtensionSpec {
    /// The checks a spec passes before any file is read: under a stable
    /// target the running torch (`env.torch_version`) must reach the
    /// target's runtime floor (an unparseable version is refused too), then
    /// the names and sources must be valid ([`ExtensionSpec::validate`]).
    /// The one definition of both rules and of their order; the façade's
    /// `Session::validate_spec` runs it before it opens the cache, and
    /// [`compute_key`] expects a spec that passed it.
    pub fn check_for(&self, env: &Environment) -> Result<(), KeyError> {
        if let Some(target) = self.torch_stable_abi_target {
            target.check_runtime_floor(&env.torch_version)?;
        }
        self.validate()
    }
}

/// Computes the payload and key of one extension for one environment.
///
/// `spec` must have passed [`ExtensionSpec::check_for`] for `env` (the
/// runtime floor and the spec's validity are not checked again here).
/// Checks run in this order: under a stable target the stable header rule;
/// then the torch version, CUDA arch list and nvcc version where the key
/// needs them. `root` is the fingerprint root for display paths of include
/// paths (the scan's paths are already relative to it).
pub fn compute_key(
    spec: &ExtensionSpec,
    env: &Environment,
    scan: &ScanReport,
    root: &Path,
) -> Result<Keyed, KeyError> {
    if let Some(target) = spec.torch_stable_abi_target {
        target.validate_headers(scan)?;
    }
    let (python_abi_dependent, python_abi_reason) = python_abi_decision(spec, scan);
    let python_abi = if python_abi_dependent {
        python_abi_tag(env)?
    } else {
        "agnostic".to_string()
    };
    let uses_torch = uses_torch(spec, scan);
    let tvm_ffi_abi = match spec.kind {
        ExtensionKind::TvmFfi => Some(
            env.tvm_ffi_abi
                .as_deref()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| KeyError::MissingTvmFfi {
                    name: spec.name.clone(),
                })?,
        ),
        ExtensionKind::Torch => None,
    };
    let torch = match uses_torch {
        true => Some(torch_abi_field(spec, env)?),
        false => None,
    };
    let mut host_flags = spec.extra_cflags.clone();
    let mut cuda_flags = spec.extra_cuda_cflags.clone();
    if let Some(t) = spec.torch_stable_abi_target {
        t.inject(&mut host_flags)?;
        t.inject(&mut cuda_flags)?;
    }
    let cuda = match spec.requires_cuda() {
        true => Some(cuda_abi(spec, env, &cuda_flags)?),
        false => None,
    };
    let host_cpu = host_cpu(spec, env)?;

    // One line per file each source reaches, and a few dozen others.
    let files: usize = scan.sources.iter().map(|s| s.files.len() + 1).sum();
    let file_bytes: usize = scan
        .sources
        .iter()
        .flat_map(|s| &s.files)
        .map(|f| "file=".len() + f.blake3.len() + 1 + f.path.len() + 1)
        .sum();
    let mut p = Payload::with_capacity(files + 64, file_bytes + 4096);
    p.push("format", KEY_FORMAT.to_string());
    p.push("name", &spec.name);
    p.push("namespace", spec.namespace());
    p.push("required_ops", spec.required_ops.join(","));
    p.push("python_abi", &python_abi);
    if let Some(tvm_ffi_abi) = tvm_ffi_abi {
        p.push("tvm_ffi_abi", tvm_ffi_abi);
    }
    if let Some((torch_field, torch_abi)) = &torch {
        p.push(torch_field, torch_abi);
        if cuda.is_some() {
            p.push("torch_cuda", env.torch_cuda.as_deref().unwrap_or("none"));
        }
        p.push("cxx11_abi", if env.cxx11_abi { "1" } else { "0" });
    }
    if let Some(host_cpu) = host_cpu {
        p.push("host_cpu", host_cpu);
    }
    if let Some(compiler_isa) = env.compiler_isa.as_deref().filter(|v| !v.trim().is_empty()) {
        p.push("compiler_isa", compiler_isa);
    }
    if let Some(cuda) = &cuda {
        p.push("cuda_archs", cuda.gencode.join(" "));
        p.push("nvcc", &cuda.nvcc);
    }
    push_sources(&mut p, scan);
    for f in &host_flags {
        p.push("cflag", f);
    }
    if cuda.is_some() {
        for f in key_cuda_flags(&cuda_flags) {
            p.push("cuda_cflag", f);
        }
    }
    for inc in &spec.extra_include_paths {
        p.push("include_path", display_path(inc, root));
    }
    for f in &spec.extra_ldflags {
        p.push("ldflag", f);
    }

    Ok(Keyed {
        name: spec.name.clone(),
        key: p.key(),
        payload: Arc::new(p),
        python_abi,
        torch_abi: torch.map_or_else(|| "none".to_string(), |(_, abi)| abi),
        uses_torch,
        python_abi_dependent,
        python_abi_reason,
        host_flags,
        cuda_flags,
        gencode: cuda.map(|c| c.gencode).unwrap_or_default(),
    })
}

impl Keyed {
    /// The payload lines that describe the ABI the binary is compiled for
    /// ([`Payload::abi_fields`]): what every compiled object's key mixes in.
    pub fn abi_fields(&self) -> String {
        self.payload.abi_fields()
    }
}

/// Whether the binary is tied to the Python ABI, and why: a pybind11
/// module always is, then an explicit setting wins, then the scan decides.
fn python_abi_decision(spec: &ExtensionSpec, scan: &ScanReport) -> (bool, PythonAbiReason) {
    if spec.is_python_module {
        (true, PythonAbiReason::PythonModule)
    } else if let Some(explicit) = spec.python_abi_dependent {
        (explicit, PythonAbiReason::Explicit)
    } else if scan.python_abi_dependent() {
        (true, PythonAbiReason::Detected)
    } else {
        (false, PythonAbiReason::NotDetected)
    }
}

/// Whether a binary of `spec` uses torch: every torch extension; a TVM-FFI
/// one when a visited file includes a torch header (`torch/…`, `ATen/…`,
/// `c10/…`, `caffe2/…`) or it names a stable-ABI target.
fn uses_torch(spec: &ExtensionSpec, scan: &ScanReport) -> bool {
    match spec.kind {
        ExtensionKind::Torch => true,
        ExtensionKind::TvmFfi => {
            !scan.torch_includes.is_empty() || spec.torch_stable_abi_target.is_some()
        }
    }
}

/// The torch field and its value: `torch_abi=stable-M.m` under a stable
/// target, else `torch=` the full version (CUDA) or the CPU cache version.
fn torch_abi_field(
    spec: &ExtensionSpec,
    env: &Environment,
) -> Result<(&'static str, String), KeyError> {
    Ok(match spec.torch_stable_abi_target {
        Some(t) => ("torch_abi", format!("stable-{t}")),
        None if spec.requires_cuda() => ("torch", env.torch_version.clone()),
        None => (
            "torch",
            TorchVersion::parse(&env.torch_version)?.cpu_cache_version(),
        ),
    })
}

/// The flags of `spec` that ask for the host's CPU (`-march=native`,
/// `-mcpu=native`, `-mtune=native`, one argument or two; in `extra_cflags`
/// and, for a CUDA extension, passed to the host compiler by nvcc's
/// `-Xcompiler`/`--compiler-options`), each as one argument. Empty for
/// almost every spec: then the key has no `host_cpu` line.
///
/// Restated in Python at `python/abicache/_warm_record.py:record_name`,
/// which reads a superset (any flag containing `native`) to name a record by
/// the CPU it holds for, tied by
/// `tests/python/test_warm_record.py::test_machines_with_different_cpus_sharing_a_cache_keep_one_record_each`.
pub fn native_cpu_flags(spec: &ExtensionSpec) -> Vec<String> {
    let cuda: &[String] = match spec.requires_cuda() {
        true => &spec.extra_cuda_cflags,
        false => &[],
    };
    abicache_isa::flags::spec_native_flags(&spec.extra_cflags, cuda)
}

/// The `host_cpu` value a key of `spec` carries: `None` without a native
/// flag; else the environment's (an error when it has none).
fn host_cpu<'e>(spec: &ExtensionSpec, env: &'e Environment) -> Result<Option<&'e str>, KeyError> {
    let native = native_cpu_flags(spec);
    let Some(flag) = native.first() else {
        return Ok(None);
    };
    match env.host_cpu.as_deref().filter(|v| !v.trim().is_empty()) {
        Some(value) => Ok(Some(value)),
        None => Err(KeyError::MissingHostCpu {
            name: spec.name.clone(),
            flag: flag.clone(),
        }),
    }
}

/// What a CUDA key adds: the `-gencode` flags and the nvcc release.
struct CudaAbi {
    /// Empty when the user's own nvcc flags choose architectures.
    gencode: Vec<String>,
    /// `major.minor`.
    nvcc: String,
}

/// The arch list (the spec's, else the environment's; not needed when
/// `cuda_flags` choose architectures) and the nvcc release of a CUDA key.
fn cuda_abi(
    spec: &ExtensionSpec,
    env: &Environment,
    cuda_flags: &[String],
) -> Result<CudaAbi, KeyError> {
    let mut gencode = Vec::new();
    if !arch::user_sets_arch(cuda_flags) {
        let list = spec
            .cuda_archs
            .as_deref()
            .or(env.cuda_archs.as_deref())
            .filter(|l| !l.trim().is_empty())
            .ok_or_else(|| KeyError::NoCudaArchs {
                name: spec.name.clone(),
            })?;
        gencode = arch::gencode_flags(list)?;
    }
    let version = env
        .nvcc_version
        .as_deref()
        .ok_or_else(|| KeyError::MissingNvcc {
            name: spec.name.clone(),
        })?;
    Ok(CudaAbi {
        gencode,
        nvcc: nvcc_major_minor(version)?,
    })
}

/// Per source, in order: the source, each file it reaches with its hash,
/// its missing and its computed includes.
fn push_sources(p: &mut Payload, scan: &ScanReport) {
    for src in &scan.sources {
        p.push("source", &src.source);
        for f in &src.files {
            p.push_joined("file", &[&f.blake3, " ", &f.path]);
        }
        for m in &src.missing_includes {
            p.push("missing_include", m);
        }
        for c in &src.computed_includes {
            p.push(
                "computed_include",
                format!("{}:{}:{}", c.file, c.line, c.text),
            );
        }
    }
}

/// The SOABI, else `cpython-<maj>.<min><abiflags>` (abiflags absent → empty).
fn python_abi_tag(env: &Environment) -> Result<String, KeyError> {
    if let Some(soabi) = env.python_soabi.as_deref().filter(|s| !s.is_empty()) {
        return Ok(soabi.to_string());
    }
    let bad = || KeyError::InvalidPythonVersion {
        version: env.python_version.clone(),
    };
    let mut parts = env.python_version.trim().split('.');
    let num = |s: Option<&str>| -> Option<u64> {
        let s = s?;
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    let major = num(parts.next()).ok_or_else(bad)?;
    let minor = num(parts.next()).ok_or_else(bad)?;
    Ok(format!(
        "cpython-{major}.{minor}{}",
        env.python_abiflags.as_deref().unwrap_or("")
    ))
}

/// `12.8.93` / `V12.8.93` / `12.8` → `12.8`.
fn nvcc_major_minor(version: &str) -> Result<String, KeyError> {
    let v = version.trim().trim_start_matches(['V', 'v']);
    let mut parts = v.split('.');
    fn digits(s: Option<&str>) -> Option<&str> {
        s.filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    }
    match (digits(parts.next()), digits(parts.next())) {
        (Some(major), Some(minor)) => Ok(format!("{major}.{minor}")),
        _ => Err(KeyError::InvalidNvccVersion {
            version: version.to_string(),
        }),
    }
}

/// The nvcc flags that enter the key: all but the scheduling flags that
/// cannot change code (`--threads N`, `-t N`, `-tN`, `--split-compile N`,
/// `-split-compile N`, `--split-compile-extended N`, and `=` forms).
pub fn key_cuda_flags(flags: &[String]) -> Vec<&String> {
    const WITH_VALUE: &[&str] = &[
        "--threads",
        "-threads",
        "-t",
        "--split-compile",
        "-split-compile",
        "--split-compile-extended",
        "-split-compile-extended",
    ];
    let mut out = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let f = flags[i].as_str();
        if WITH_VALUE.contains(&f) {
            i += 2; // the flag and its value
            continue;
        }
        let joined = WITH_VALUE
            .iter()
            .any(|o| f.strip_prefix(o).is_some_and(|r| r.starts_with('=')))
            || f.strip_prefix("-t")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()));
        if !joined {
            out.push(&flags[i]);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn scheduling_flags_are_left_out_of_the_key() {
        let flags = s(&[
            "-O3",
            "--threads",
            "8",
            "--threads=4",
            "-t",
            "2",
            "-t16",
            "--split-compile",
            "0",
            "--split-compile=4",
            "-split-compile",
            "3",
            "--split-compile-extended=2",
            "--use_fast_math",
        ]);
        assert_eq!(key_cuda_flags(&flags), ["-O3", "--use_fast_math"]);
        assert_eq!(
            key_cuda_flags(&s(&["-O3", "-tx"])),
            ["-O3", "-tx"],
            "-t needs digits to be joined"
        );
    }

    #[test]
    fn nvcc_versions() {
        assert_eq!(nvcc_major_minor("12.8").unwrap(), "12.8");
        assert_eq!(nvcc_major_minor("12.8.93").unwrap(), "12.8");
        assert_eq!(nvcc_major_minor("V13.0.48").unwrap(), "13.0");
        assert!(nvcc_major_minor("12").is_err());
        assert!(nvcc_major_minor("twelve").is_err());
    }
}
