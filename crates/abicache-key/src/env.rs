//! What it is built for: the environment (docs/python-api.md, "The environment").

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::spec::{base_dir, toml_message};
use crate::KeyError;

/// The Python, torch and CUDA toolchain an extension is built for.
///
/// Probed from an interpreter (JSON, same field names) or read from a TOML
/// file with [`Environment::load`]. Only the ABI fields enter a key; the
/// paths (`torch_dir`, `python_include`, `cuda_include_dirs`) are for
/// building and include resolution and never do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// `platform.python_version()`, e.g. `3.12.9`.
    pub python_version: String,
    /// `sysconfig.get_config_var("SOABI")`, e.g. `cpython-313t-x86_64-linux-gnu`.
    #[serde(default)]
    pub python_soabi: Option<String>,
    /// `sys.abiflags`, e.g. `t`; absent on Windows.
    #[serde(default)]
    pub python_abiflags: Option<String>,
    /// `torch.__version__`, e.g. `2.8.0+cu128`.
    pub torch_version: String,
    /// `torch.version.cuda`, e.g. `12.8`; absent on CPU and ROCm wheels.
    #[serde(default)]
    pub torch_cuda: Option<String>,
    /// `torch.version.hip`; absent except on ROCm wheels.
    #[serde(default)]
    pub torch_hip: Option<String>,
    /// `torch._C._GLIBCXX_USE_CXX11_ABI`.
    pub cxx11_abi: bool,
    /// Release of the nvcc that builds CUDA sources, e.g. `12.8`.
    #[serde(default)]
    pub nvcc_version: Option<String>,
    /// The torch package directory (has `include/` and `lib/`). Build only.
    #[serde(default)]
    pub torch_dir: Option<PathBuf>,
    /// The Python include directory (`Python.h`). Build only.
    #[serde(default)]
    pub python_include: Option<PathBuf>,
    /// CUDA include directories (toolkit, NVIDIA pip wheels). Build only.
    #[serde(default)]
    pub cuda_include_dirs: Vec<PathBuf>,
    /// Arch list from `TORCH_CUDA_ARCH_LIST` or the visible GPUs; the spec's
    /// `cuda_archs` wins over it.
    #[serde(default)]
    pub cuda_archs: Option<String>,
    /// What `-march=native` (`-mcpu=native`, `-mtune=native`) resolves to
    /// on the machine the binary is for: the target options the compiler
    /// proper receives, normalised (`-march=znver3 -mavx512bf16 …`). Filled
    /// in by probing the host compiler when a spec has such a flag; set it
    /// in an environment file to key for another machine. Only a spec with
    /// such a flag reads it (the payload's `host_cpu` line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<String>,
    /// The instruction-set extensions the host compiler enables by itself,
    /// beyond the fixed baseline (`x86-64`, `armv8-a`): `/proc/cpuinfo`
    /// names, sorted, space-separated (`avx512f avx2 …`), read from its
    /// predefined macros without flags. Filled in by probing the host
    /// compiler (`CXX`, else `c++`) once per compiler; empty for a plain
    /// compiler, which adds no `compiler_isa` line to the key. A `CXX`
    /// wrapper that adds `-mavx512f`, or a compiler whose default `-march`
    /// is newer, gets another key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler_isa: Option<String>,
    /// The TVM-FFI C ABI the headers in [`tvm_ffi_include_dirs`](Self::tvm_ffi_include_dirs)
    /// declare (docs/tvm-ffi.md, "The key"): `0.X` while TVM-FFI is at
    /// `0.X.Y` (its release notes: a bump of `X` breaks the C ABI, `Y` does
    /// not), `M` from `1.0` on (semantic versioning). Read from
    /// `tvm/ffi/c_api.h`'s `TVM_FFI_VERSION_MAJOR`/`_MINOR`. Only a
    /// TVM-FFI extension reads it (the payload's `tvm_ffi_abi` line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tvm_ffi_abi: Option<String>,
    /// TVM-FFI's include directories (its own and DLPack's), system roots
    /// for a TVM-FFI extension. Build only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tvm_ffi_include_dirs: Vec<PathBuf>,
    /// The directory holding `libtvm_ffi.so`, linked by a TVM-FFI extension. Build only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tvm_ffi_lib_dir: Option<PathBuf>,
}

impl Environment {
    /// Reads an environment TOML; relative paths are resolved against the
    /// file's directory. Unknown fields are [`KeyError::EnvParse`].
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let text = crate::spec::read_toml_file(path)?;
        Self::parse(&text, path)
    }

    /// Parses environment TOML text as if read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, KeyError> {
        let mut env: Self = toml::from_str(text).map_err(|e| KeyError::EnvParse {
            path: path.to_path_buf(),
            message: toml_message(text, &e),
        })?;
        let dir = base_dir(path)?;
        let paths = env
            .torch_dir
            .iter_mut()
            .chain(env.python_include.iter_mut())
            .chain(env.cuda_include_dirs.iter_mut())
            .chain(env.tvm_ffi_include_dirs.iter_mut())
            .chain(env.tvm_ffi_lib_dir.iter_mut());
        for p in paths {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
        Ok(env)
    }

    /// The roots under which `<x>` includes are system headers (docs/key.md, step 1),
    /// in this order and only those that exist: `torch_dir/include`,
    /// `torch_dir/include/torch/csrc/api/include`, `python_include`, each of
    /// `cuda_include_dirs`, then `tvm_ffi_include_dirs` (headers a TVM-FFI
    /// extension includes are TVM-FFI's, which `tvm_ffi_abi` stands for).
    pub fn system_include_roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::new();
        if let Some(t) = &self.torch_dir {
            roots.push(t.join("include"));
            roots.push(
                t.join("include")
                    .join("torch")
                    .join("csrc")
                    .join("api")
                    .join("include"),
            );
        }
        roots.extend(self.python_include.iter().cloned());
        roots.extend(self.cuda_include_dirs.iter().cloned());
        roots.extend(self.tvm_ffi_include_dirs.iter().cloned());
        roots.retain(|r| r.is_dir());
        roots
    }
}
