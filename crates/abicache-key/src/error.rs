//! The one error type of this crate.
//!
//! Every message says what happened and what to do; paths, names, flags and
//! versions are quoted in backticks.

use std::path::PathBuf;

/// Everything that can go wrong while reading a spec or environment,
/// applying the torch-version and stable-ABI rules, or computing a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading a file failed (the message names the path, via `fs-err`).
    #[error(transparent)]
    Io(#[from] std::io::Error),

    /// An `abicache.toml` could not be parsed (syntax, unknown or mistyped field).
    #[error("invalid extension spec `{}`: {message}", path.display())]
    SpecParse {
        /// The TOML file.
        path: PathBuf,
        /// The parser's message (names the field and the line).
        message: String,
    },

    /// An environment TOML could not be parsed.
    #[error("invalid environment file `{}`: {message}", path.display())]
    EnvParse {
        /// The TOML file.
        path: PathBuf,
        /// The parser's message (names the field and the line).
        message: String,
    },

    /// A validation error in one `[[extension]]` of a spec file (wraps the
    /// error, adding the file).
    #[error("in extension spec `{}`: {inner}", path.display())]
    InSpecFile {
        /// The TOML file.
        path: PathBuf,
        /// What is wrong with the extension.
        inner: Box<KeyError>,
    },

    /// A spec file has no `[[extension]]` table.
    #[error("extension spec `{}` defines no extension: add an `[[extension]]` table with `name` and `sources`", path.display())]
    NoExtensions {
        /// The TOML file.
        path: PathBuf,
    },

    /// Two `[[extension]]` tables share a name.
    #[error("extension spec `{}` defines extension `{name}` twice: extension names must be unique", path.display())]
    DuplicateExtension {
        /// The TOML file.
        path: PathBuf,
        /// The repeated name.
        name: String,
    },

    /// An extension was asked for by name and the spec has no such extension.
    #[error("no extension `{requested}` in the spec; it defines: {available}")]
    ExtensionNotFound {
        /// The requested name.
        requested: String,
        /// Comma-separated names defined by the spec.
        available: String,
    },

    /// No extension name was given and the spec defines more than one.
    #[error("the spec defines several extensions ({available}): name the one you mean (e.g. `--extension NAME`)")]
    AmbiguousExtension {
        /// Comma-separated names defined by the spec.
        available: String,
    },

    /// `name` or `namespace` is not a C identifier.
    #[error("invalid extension {field} `{value}`: it must match `[A-Za-z_][A-Za-z0-9_]*` (it becomes a C identifier and a library file name)")]
    InvalidName {
        /// `name` or `namespace`.
        field: &'static str,
        /// The rejected value (newlines escaped).
        value: String,
    },

    /// An extension without sources.
    #[error("extension `{name}` has no sources: list at least one `.cpp`, `.cc`, `.cxx`, `.c` or `.cu` file in `sources`")]
    NoSources {
        /// The extension.
        name: String,
    },

    /// A source with an extension the toolchain does not compile.
    #[error("source `{}` of extension `{name}` has an unsupported file extension: sources must end in `.cpp`, `.cc`, `.cxx`, `.c` or `.cu`", path.display())]
    UnknownSourceExtension {
        /// The extension.
        name: String,
        /// The rejected source.
        path: PathBuf,
    },

    /// A header listed as a source.
    #[error("`{}` is a header, not a source (extension `{name}`): remove it from `sources`; headers reached by `#include` are fingerprinted automatically, and directories go in `extra_include_paths`", path.display())]
    HeaderAsSource {
        /// The extension.
        name: String,
        /// The header.
        path: PathBuf,
    },

    /// A torch version that is not PEP 440.
    #[error("cannot parse torch version `{version}` ({reason}): abicache needs a PEP 440 version such as `2.10.0` or `2.11.0a0+git1234abc`; check `torch.__version__` or `torch_version` in the environment file")]
    InvalidTorchVersion {
        /// The version as found.
        version: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A Python version whose major.minor cannot be read (needed for the SOABI fallback).
    #[error("cannot read major.minor from python version `{version}`, needed because `python_soabi` is absent: set `python_soabi` (sysconfig SOABI) or a version like `3.12.9` in the environment")]
    InvalidPythonVersion {
        /// The version as found.
        version: String,
    },

    /// A stable-ABI target that is not `M.m` or `[M, m]`.
    #[error("invalid torch_stable_abi_target `{value}`: write it as \"M.m\" (e.g. \"2.10\") or [M, m] (e.g. [2, 10]), each part 0..=255")]
    InvalidStableTarget {
        /// The rejected value.
        value: String,
    },

    /// The user's flags define a different `TORCH_TARGET_VERSION` than the target.
    #[error("flag `{found}` conflicts with torch_stable_abi_target {target}, which defines `{expected}`: remove `TORCH_TARGET_VERSION` from the extra flags and let the target set it")]
    ConflictingTargetDefine {
        /// The user's flag.
        found: String,
        /// The define the target requires.
        expected: String,
        /// The target, `M.m`.
        target: String,
    },

    /// A non-stable torch header is included under an explicit stable target.
    #[error("`{file}`:{line} includes `{include}`, which is not part of the libtorch stable ABI, but the extension declares torch_stable_abi_target {target}: under a stable target only `torch/csrc/stable/` and `torch/headeronly/` headers are allowed; use their stable equivalents, or remove torch_stable_abi_target to key on the exact torch build")]
    NonStableHeader {
        /// Display path of the including file.
        file: String,
        /// 1-based line.
        line: u32,
        /// The include as written.
        include: String,
        /// The target, `M.m`.
        target: String,
    },

    /// A computed include that cannot be resolved, under an explicit stable
    /// target (what it includes cannot be verified).
    #[error("`{file}`:{line} has a computed include `#include {text}` that cannot be resolved from the macros defined in the scanned files and `-D` flags, so it cannot be checked against the libtorch stable ABI required by torch_stable_abi_target {target}: define its macro in a scanned header or with `-D` in extra_cflags, include the header by name, or remove torch_stable_abi_target")]
    ComputedIncludeUnderStable {
        /// Display path of the including file.
        file: String,
        /// 1-based line.
        line: u32,
        /// The operand as written.
        text: String,
        /// The target, `M.m`.
        target: String,
    },

    /// The running torch is older than the stable-ABI target.
    #[error("torch `{found}` is below this extension's stable-ABI target {target}: a binary built for torch >= {target} cannot run on it, so abicache refuses to build or load it; install torch >= {target} (e.g. `pip install 'torch>={target}'`) or lower torch_stable_abi_target")]
    TorchBelowFloor {
        /// The target, `M.m`.
        target: String,
        /// The torch version found.
        found: String,
    },

    /// The torch version cannot be compared with the stable-ABI target (fail closed).
    #[error("cannot check torch `{found}` against this extension's stable-ABI target {target} because it is not a PEP 440 version, so abicache refuses to build or load it (fail closed); install a released or nightly torch whose `torch.__version__` reads like `2.10.0`")]
    UnverifiableTorch {
        /// The target, `M.m`.
        target: String,
        /// The torch version found.
        found: String,
    },

    /// An entry of a CUDA arch list is not understood.
    #[error("unknown CUDA arch `{entry}` in `{list}`: write archs as `M.m`, optionally with an `a`/`f` suffix and `+PTX` (e.g. `8.0 8.6+PTX;9.0a`), or a name like `Hopper`; fix `cuda_archs` or `TORCH_CUDA_ARCH_LIST`")]
    InvalidCudaArch {
        /// The rejected entry.
        entry: String,
        /// The whole list as given.
        list: String,
    },

    /// A CUDA extension with no arch list from anywhere.
    #[error("no CUDA architectures for extension `{name}`: set `cuda_archs` in the spec or `TORCH_CUDA_ARCH_LIST` (e.g. `8.0;9.0+PTX`), or run where a GPU is visible")]
    NoCudaArchs {
        /// The extension.
        name: String,
    },

    /// A TVM-FFI extension and an environment without TVM-FFI's ABI version.
    #[error("extension `{name}` is a TVM-FFI module but the environment names no TVM-FFI ABI (`tvm_ffi_abi`): install `apache-tvm-ffi` in this interpreter (`pip install apache-tvm-ffi`), or set `tvm_ffi_abi` in the environment file")]
    MissingTvmFfi {
        /// The extension.
        name: String,
    },

    /// A CUDA extension and no nvcc.
    #[error("extension `{name}` has CUDA sources but no nvcc was found: install the CUDA toolkit (or the `nvidia-cuda-nvcc` pip wheel matching torch's CUDA) and set `CUDA_HOME`, or set `nvcc_version` in the environment file")]
    MissingNvcc {
        /// The extension.
        name: String,
    },

    /// A flag asks for the host's CPU (`-march=native`) and the environment
    /// does not say what that CPU is.
    #[error("extension `{name}` is compiled with `{flag}`, so its key needs the target options that flag resolves to (`host_cpu`), and the environment has none: set `host_cpu` in the environment file to the value `abicache key` shows on the target machine, or key it through a session (`abicache key --python`, the Python package), which probes this machine's compiler")]
    MissingHostCpu {
        /// The extension.
        name: String,
        /// The native flag, e.g. `-march=native`.
        flag: String,
    },

    /// An nvcc version without a readable major.minor.
    #[error("cannot read major.minor from nvcc version `{version}`: expected e.g. `12.8` or `12.8.93`; check `nvcc --version` or `nvcc_version` in the environment file")]
    InvalidNvccVersion {
        /// The version as found.
        version: String,
    },

    /// A stored payload that does not read as `field=value` lines.
    #[error("invalid payload line {line}: `{text}` is not `field=value`; the stored entry is corrupt and will be rebuilt")]
    InvalidPayload {
        /// 1-based line number.
        line: usize,
        /// The offending line.
        text: String,
    },
}

impl KeyError {
    /// True for refusals on ABI grounds (a non-stable header or computed
    /// include under a stable target, a torch below the target or not
    /// comparable with it), as opposed to malformed input.
    pub fn is_abi_refusal(&self) -> bool {
        match self {
            KeyError::NonStableHeader { .. }
            | KeyError::ComputedIncludeUnderStable { .. }
            | KeyError::TorchBelowFloor { .. }
            | KeyError::UnverifiableTorch { .. } => true,
            KeyError::InSpecFile { inner, .. } => inner.is_abi_refusal(),
            _ => false,
        }
    }
}
