//! Compile and link command lines, computed like `torch/utils/cpp_extension.py` of
//! torch 2.15 computes them for `load()` (`_write_ninja_file_to_build_library`,
//! `_write_ninja_file`, `_prepare_ldflags`).
//!
//! Host compile (torch's `compile` rule, `$cxx $cflags -c $in -o $out`):
//! `c++ -DTORCH_EXTENSION_NAME=<name> -DTORCH_API_INCLUDE_EXTENSION_H -I<extra include>...
//! -isystem <torch>/include -isystem <torch>/include/torch/csrc/api/include
//! [-isystem <cuda include>...] -isystem <python include> -D_GLIBCXX_USE_CXX11_ABI=<0|1>
//! -fPIC -std=c++20 <extra_cflags> -c <src> -o <obj>`.
//!
//! nvcc compile (torch's `cuda_compile` rule): `nvcc [-ccbin $CC] <the same defines and
//! includes> -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
//! -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr
//! <gencode> --compiler-options -fPIC <extra_cuda_cflags> [-std=c++20 unless a -std= is
//! there] -c <src> -o <obj>`. nvcc gets no `extra_cflags`, as in torch.
//!
//! Link (torch's `link` rule, `$cxx $in $ldflags -o $out`): `c++ <objects> -shared
//! <extra_ldflags> -L<torch>/lib -lc10 [-lc10_cuda] -ltorch_cpu [-ltorch_cuda] -ltorch
//! [-ltorch_python] [-L<cuda lib> -lcudart] -o <lib>`.
//!
//! Where we differ from torch, and why:
//! - No ninja and no `-MMD -MF`/`-MD -MF` depfiles: the scanner already hashed each unit's
//!   headers, and objects live in a content-addressed object cache (`<key>.o`) instead of
//!   `<build dir>/<stem>.o`, so two extensions share an object and a stale object can never
//!   be picked up by timestamp.
//! - `-ltorch_python` only for Python-ABI dependent extensions (torch always links it
//!   unless `is_standalone`): a `torch.ops` library that does not touch CPython must not
//!   pull in `libtorch_python`, or it would not be Python-agnostic.
//! - `-D_GLIBCXX_USE_CXX11_ABI=<0|1>` is always passed (torch ≤ 2.8 did, 2.9+ relies on the
//!   compiler's default): the value comes from the torch being built for, so a compiler
//!   whose default differs (old devtoolsets) cannot produce a silently incompatible object.
//! - torch 2.15 defines no pybind11 ABI flags (`_get_pybind11_abi_build_flags` returns `[]`),
//!   so there are none here either.
//! - No implicit ccache/sccache: torch wraps the compiler when one is on `PATH`; we only use
//!   the launcher named by `ABICACHE_COMPILER_LAUNCHER`, since the object cache already
//!   avoids recompiles and an implicit wrapper surprises.
//! - `--compiler-options '-fPIC'` is passed as the two arguments the shell makes of it.
//! - With NVIDIA's pip wheels there is no `libcudart.so`, only `libcudart.so.N`, so the
//!   runtime is linked as `-l:libcudart.so.N` (see [`crate::Nvcc::cudart_flag`]).
//! - Arch flags are the plan's `gencode` list, computed by the caller from `cuda_archs`
//!   (torch computes them here from `TORCH_CUDA_ARCH_LIST` or the visible GPUs).
//! - Relocatable objects: when the plan has a fingerprint [`BuildPlan::root`], the compiler
//!   runs in that directory, and the source and every `-I`/`-isystem` directory under it are
//!   named relative to it; host compiles also get `-ffile-prefix-map=<root>=.` (which implies
//!   `-fmacro-prefix-map`). Neither the object key nor the object's bytes (`__FILE__`, debug
//!   paths) then depend on where the checkout lives, so a second checkout reuses every
//!   unchanged object. torch writes absolute paths everywhere.

use std::path::{Path, PathBuf};

use crate::error::BuildError;
use crate::toolchain::Toolchain;

/// The C++ standard torch 2.15 compiles extensions with.
pub const CXX_STANDARD: &str = "-std=c++20";

/// The C++ standard TVM-FFI's `tvm_ffi.cpp` builds modules with (with `-O2`).
pub const TVM_FFI_CXX_STANDARD: &str = "-std=c++17";

/// The optimisation level TVM-FFI's `tvm_ffi.cpp` builds modules with.
pub const TVM_FFI_OPT_LEVEL: &str = "-O2";

/// torch's `COMMON_NVCC_FLAGS`.
pub const COMMON_NVCC_FLAGS: [&str; 5] = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
];

/// One translation unit and the files the scanner visited for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The source file (made absolute before compiling).
    pub source: PathBuf,
    /// The unit's scanned files as `(display path, BLAKE3 hex)`, the source first.
    pub files: Vec<(String, String)>,
    /// Whether the unit's files use `TORCH_EXTENSION_NAME`. When they do not,
    /// the `-DTORCH_EXTENSION_NAME=` define cannot change the object, so it is
    /// left out of the object key and two extensions share the unit's object.
    pub uses_extension_name: bool,
}

impl Unit {
    /// The path shown to users: the scanner's display path of the source when the first
    /// scanned file is the source, else the source path itself.
    pub fn display(&self) -> String {
        match self.files.first() {
            Some((display, _)) if self.source.ends_with(display) => display.clone(),
            _ => self.source.display().to_string(),
        }
    }
}

/// What to build, as plain data filled in by the caller from the extension spec, the
/// environment and the scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildPlan {
    /// Library name; the output is `<name>.so` and `TORCH_EXTENSION_NAME=<name>`.
    pub name: String,
    /// Translation units, in link order.
    pub sources: Vec<Unit>,
    /// Link the CUDA libraries and add the CUDA include dirs.
    pub requires_cuda: bool,
    /// Link `libtorch_python`.
    pub python_abi_dependent: bool,
    /// torch's `_GLIBCXX_USE_CXX11_ABI`.
    pub cxx11_abi: bool,
    /// torch's package directory (holds `include/` and `lib/`).
    pub torch_dir: PathBuf,
    /// The Python include directory (`sysconfig.get_path("include")`), if any.
    pub python_include: Option<PathBuf>,
    /// CUDA include directories (used only when `requires_cuda`).
    pub cuda_include_dirs: Vec<PathBuf>,
    /// Extra host compiler flags (already holding `-DTORCH_TARGET_VERSION=` when stable).
    pub extra_cflags: Vec<String>,
    /// Extra nvcc flags.
    pub extra_cuda_cflags: Vec<String>,
    /// Extra linker flags.
    pub extra_ldflags: Vec<String>,
    /// `-I` directories, in order.
    pub extra_include_paths: Vec<PathBuf>,
    /// Arch flags for nvcc, e.g. `-gencode=arch=compute_90,code=sm_90`.
    pub gencode: Vec<String>,
    /// The key's ABI lines, mixed into every unit's object key.
    pub abi_fields: String,
    /// The fingerprint root (absolute): compiles run there with paths under it made
    /// relative, so objects are relocatable. `None` keeps absolute paths.
    pub root: Option<PathBuf>,
    /// For a TVM-FFI module (docs/tvm-ffi.md): what it is built against.
    /// `None`: a torch extension.
    pub tvm_ffi: Option<TvmFfiBuild>,
}

/// How a TVM-FFI module is built, as `tvm_ffi.cpp.build` builds it
/// (`-std=c++17 -O2`, TVM-FFI's and DLPack's headers, `-ltvm_ffi`), plus
/// torch's headers, defines and libraries only when it uses torch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TvmFfiBuild {
    /// TVM-FFI's include directories (its own and DLPack's), as `-isystem`.
    pub include_dirs: Vec<PathBuf>,
    /// The directory holding `libtvm_ffi.so`.
    pub lib_dir: PathBuf,
    /// Whether a source includes a torch header: then torch's include
    /// directories, `_GLIBCXX_USE_CXX11_ABI` and libraries are added as for a
    /// torch extension (and torch's C++ standard is used).
    pub uses_torch: bool,
}

impl BuildPlan {
    /// Whether the library is built against torch: a torch extension, or a
    /// TVM-FFI module that includes a torch header.
    pub fn uses_torch(&self) -> bool {
        self.tvm_ffi.as_ref().is_none_or(|t| t.uses_torch)
    }

    /// The C++ standard flag: torch's when it uses torch, else TVM-FFI's.
    fn cxx_standard(&self) -> &'static str {
        match self.uses_torch() {
            true => CXX_STANDARD,
            false => TVM_FFI_CXX_STANDARD,
        }
    }
}

impl BuildPlan {
    /// `path` as the compiler is given it: relative to [`BuildPlan::root`] when it lies
    /// under it (`.` for the root itself), else absolute.
    pub fn compiler_path(&self, path: &Path) -> PathBuf {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        match self.root.as_deref().map(|root| path.strip_prefix(root)) {
            Some(Ok(rel)) if rel.as_os_str().is_empty() => PathBuf::from("."),
            Some(Ok(rel)) => rel.to_path_buf(),
            _ => path,
        }
    }

    /// The directory compilers run in: the root, else `fallback`.
    pub fn compile_dir(&self, fallback: &Path) -> PathBuf {
        self.root.clone().unwrap_or_else(|| fallback.to_path_buf())
    }

    /// Flags that only rewrite the paths recorded in an object (never part of its key,
    /// since they name the absolute root): `-ffile-prefix-map=<root>=.` for host units.
    pub fn relocation_flags(&self, kind: UnitKind) -> Vec<String> {
        match (&self.root, kind) {
            (Some(root), UnitKind::Host) => {
                vec![format!("-ffile-prefix-map={}=.", root.display())]
            }
            _ => Vec::new(),
        }
    }
}

/// Which compiler a unit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// The host C++ compiler (`.cpp`, `.cc`, `.cxx`, `.c`, anything else).
    Host,
    /// nvcc (`.cu`, `.cuh`, as torch's `_is_cuda_file`).
    Cuda,
}

/// The compiler for `source`, by extension, as torch decides it.
pub fn unit_kind(source: &Path) -> UnitKind {
    match source.extension().and_then(|e| e.to_str()) {
        Some("cu" | "cuh") => UnitKind::Cuda,
        _ => UnitKind::Host,
    }
}

/// One compile command, split so that the object key can leave out what does not
/// change the object (the launcher, the output path, nvcc scheduling flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileCommand {
    /// The launcher (ccache, sccache), if any.
    pub launcher: Option<PathBuf>,
    /// The compiler executable.
    pub compiler: PathBuf,
    /// Flags between the compiler and `-c <source>`.
    pub flags: Vec<String>,
    /// The source path: relative to [`CompileCommand::dir`] when it lies under the
    /// plan's root, else absolute.
    pub source: PathBuf,
    /// The object to write.
    pub output: PathBuf,
    /// The directory the compiler runs in.
    pub dir: PathBuf,
    /// Flags that do not change what is compiled, only paths recorded in the object or
    /// where a precompiled header is found (`-ffile-prefix-map`, `-include` of a PCH):
    /// passed after `flags`, left out of the object key.
    pub unkeyed_flags: Vec<String>,
}

impl CompileCommand {
    /// The exact argv: `[launcher] compiler flags... -c source -o output`.
    pub fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = self
            .launcher
            .iter()
            .map(|l| l.display().to_string())
            .collect();
        argv.push(self.compiler.display().to_string());
        argv.extend(self.flags.iter().cloned());
        argv.extend(self.unkeyed_flags.iter().cloned());
        argv.extend(["-c".into(), self.source.display().to_string()]);
        argv.extend(["-o".into(), self.output.display().to_string()]);
        argv
    }

    /// What goes into the object key: the argv without the launcher, without `-o <output>`,
    /// without [`CompileCommand::unkeyed_flags`] and without nvcc's scheduling flags
    /// (`--threads N`, `--split-compile N`, `=` forms).
    pub fn key_argv(&self) -> Vec<String> {
        let mut argv = vec![self.compiler.display().to_string()];
        argv.extend(strip_scheduling_flags(&self.flags));
        argv.extend(["-c".into(), self.source.display().to_string()]);
        argv
    }
}

/// Removes nvcc flags that only schedule work and cannot change the object.
pub fn strip_scheduling_flags(flags: &[String]) -> Vec<String> {
    const WITH_VALUE: [&str; 4] = ["--threads", "-t", "--split-compile", "-split-compile"];
    let mut out = Vec::with_capacity(flags.len());
    let mut skip_next = false;
    for flag in flags {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if WITH_VALUE.contains(&flag.as_str()) {
            skip_next = true;
            continue;
        }
        if WITH_VALUE
            .iter()
            .any(|w| flag.strip_prefix(w).is_some_and(|r| r.starts_with('=')))
        {
            continue;
        }
        out.push(flag.clone());
    }
    out
}

/// Defines and include flags shared by the host compiler and nvcc (torch's `common_cflags`).
/// A TVM-FFI module that does not use torch gets neither torch's defines
/// nor its C++ ABI define (as `tvm_ffi.cpp.build`).
fn common_flags(plan: &BuildPlan) -> Vec<String> {
    let mut flags = Vec::new();
    if plan.uses_torch() {
        flags.push(format!("-DTORCH_EXTENSION_NAME={}", plan.name));
        flags.push("-DTORCH_API_INCLUDE_EXTENSION_H".to_string());
    }
    for inc in &plan.extra_include_paths {
        flags.push(format!("-I{}", plan.compiler_path(inc).display()));
    }
    for inc in system_includes(plan) {
        flags.push("-isystem".into());
        flags.push(plan.compiler_path(&inc).display().to_string());
    }
    if plan.uses_torch() {
        flags.push(format!(
            "-D_GLIBCXX_USE_CXX11_ABI={}",
            u8::from(plan.cxx11_abi)
        ));
    }
    flags
}

/// torch's `include_paths("cuda" | "cpu")` plus the Python include dir; for
/// a TVM-FFI module, TVM-FFI's include directories, then torch's only when
/// it uses torch and Python's only when it uses torch or the Python ABI.
pub fn system_includes(plan: &BuildPlan) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(tvm) = &plan.tvm_ffi {
        dirs.extend(tvm.include_dirs.iter().cloned());
    }
    if plan.uses_torch() {
        let include = plan.torch_dir.join("include");
        dirs.push(include.clone());
        dirs.push(
            include
                .join("torch")
                .join("csrc")
                .join("api")
                .join("include"),
        );
    }
    if plan.requires_cuda {
        dirs.extend(plan.cuda_include_dirs.iter().cloned());
    }
    if plan.uses_torch() || plan.python_abi_dependent {
        dirs.extend(plan.python_include.iter().cloned());
    }
    dirs
}

fn stripped(flags: &[String]) -> impl Iterator<Item = String> + '_ {
    flags.iter().map(|f| f.trim().to_string())
}

/// Host compiler flags for every non-CUDA unit of `plan`.
pub fn host_flags(plan: &BuildPlan) -> Vec<String> {
    let mut flags = common_flags(plan);
    flags.extend(["-fPIC".to_string(), plan.cxx_standard().to_string()]);
    if plan.tvm_ffi.is_some() {
        flags.push(TVM_FFI_OPT_LEVEL.to_string());
    }
    flags.extend(stripped(&plan.extra_cflags));
    flags
}

/// nvcc flags for every CUDA unit of `plan`; `ccbin` is `CC`, passed as `-ccbin`.
pub fn nvcc_flags(plan: &BuildPlan, ccbin: Option<&str>) -> Vec<String> {
    let mut flags = Vec::new();
    let extra: Vec<String> = stripped(&plan.extra_cuda_cflags).collect();
    if let Some(cc) = ccbin {
        if !extra
            .iter()
            .any(|f| f.starts_with("-ccbin") || f.starts_with("--compiler-bindir"))
        {
            flags.extend(["-ccbin".to_string(), cc.to_string()]);
        }
    }
    flags.extend(common_flags(plan));
    if plan.tvm_ffi.is_none() {
        flags.extend(COMMON_NVCC_FLAGS.iter().map(|f| f.to_string()));
    }
    flags.extend(plan.gencode.iter().cloned());
    flags.extend(["--compiler-options".to_string(), "-fPIC".to_string()]);
    if plan.tvm_ffi.is_some() {
        flags.push(TVM_FFI_OPT_LEVEL.to_string());
    }
    flags.extend(extra);
    if !flags.iter().any(|f| f.starts_with("-std=")) {
        flags.push(plan.cxx_standard().to_string());
    }
    flags
}

/// The compile command for `unit`, writing `output`.
pub fn compile_command(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    unit: &Unit,
    output: &Path,
) -> Result<CompileCommand, BuildError> {
    let kind = unit_kind(&unit.source);
    let (compiler, flags) = match kind {
        UnitKind::Host => (toolchain.cxx.path.clone(), host_flags(plan)),
        UnitKind::Cuda => {
            let nvcc =
                toolchain
                    .nvcc
                    .as_ref()
                    .ok_or_else(|| BuildError::CudaSourceWithoutNvcc {
                        unit: unit.display(),
                    })?;
            (
                nvcc.tool.path.clone(),
                nvcc_flags(plan, toolchain.ccbin.as_deref()),
            )
        }
    };
    let launcher = match kind {
        UnitKind::Cuda => toolchain
            .launcher
            .clone()
            .filter(|l| crate::toolchain::launcher_compiles_cuda(l)),
        UnitKind::Host => toolchain.launcher.clone(),
    };
    Ok(CompileCommand {
        launcher,
        compiler,
        flags,
        source: plan.compiler_path(&unit.source),
        output: output.to_path_buf(),
        dir: plan.compile_dir(output.parent().unwrap_or(Path::new("."))),
        unkeyed_flags: plan.relocation_flags(kind),
    })
}

/// The link argv (torch's `$cxx $in $ldflags -o $out`), writing `output`.
pub fn link_argv(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    objects: &[PathBuf],
    output: &Path,
) -> Vec<String> {
    let mut argv = vec![toolchain.cxx.path.display().to_string()];
    argv.extend(objects.iter().map(|o| o.display().to_string()));
    argv.push("-shared".into());
    argv.extend(stripped(&plan.extra_ldflags));
    if let Some(tvm) = &plan.tvm_ffi {
        argv.push(format!("-L{}", tvm.lib_dir.display()));
        argv.push("-ltvm_ffi".into());
    }
    if plan.uses_torch() {
        argv.push(format!("-L{}", plan.torch_dir.join("lib").display()));
        argv.push("-lc10".into());
        if plan.requires_cuda {
            argv.push("-lc10_cuda".into());
        }
        argv.push("-ltorch_cpu".into());
        if plan.requires_cuda {
            argv.push("-ltorch_cuda".into());
        }
        argv.push("-ltorch".into());
        if plan.python_abi_dependent {
            argv.push("-ltorch_python".into());
        }
    }
    if plan.requires_cuda {
        let nvcc = toolchain.nvcc.as_ref();
        if let Some(dir) = nvcc.and_then(|n| n.lib_dir.as_ref()) {
            argv.push(format!("-L{}", dir.display()));
        }
        argv.push(nvcc.map_or("-lcudart".into(), |n| n.cudart_flag.clone()));
    }
    argv.extend(["-o".into(), output.display().to_string()]);
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduling_flags_are_left_out_of_the_key_in_both_forms() {
        let flags: Vec<String> = [
            "-O3",
            "--threads",
            "4",
            "--split-compile=8",
            "-t",
            "2",
            "-DX",
            "--threads=0",
            "-split-compile",
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            strip_scheduling_flags(&flags),
            vec!["-O3".to_string(), "-DX".to_string()]
        );
    }

    #[test]
    fn cu_and_cuh_go_to_nvcc_everything_else_to_the_host_compiler() {
        assert_eq!(unit_kind(Path::new("a/k.cu")), UnitKind::Cuda);
        assert_eq!(unit_kind(Path::new("k.cuh")), UnitKind::Cuda);
        assert_eq!(unit_kind(Path::new("k.c")), UnitKind::Host);
        assert_eq!(unit_kind(Path::new("k.cpp")), UnitKind::Host);
    }

    #[test]
    fn nvcc_keeps_a_user_standard_and_ccbin() {
        let plan = BuildPlan {
            name: "x".into(),
            extra_cuda_cflags: vec!["-std=c++17".into(), "-ccbin=/usr/bin/g++-12".into()],
            ..Default::default()
        };
        let flags = nvcc_flags(&plan, Some("gcc"));
        assert!(!flags.contains(&CXX_STANDARD.to_string()));
        assert!(!flags.contains(&"gcc".to_string()));
    }

    fn host_only_toolchain() -> Toolchain {
        Toolchain {
            cxx: crate::toolchain::Tool {
                path: "/usr/bin/c++".into(),
                version: "c++ 12".into(),
            },
            nvcc: None,
            ccbin: None,
            launcher: None,
        }
    }

    #[test]
    fn a_tvm_ffi_module_is_built_as_tvm_ffi_builds_it_and_without_torch() {
        let tvm = |uses_torch: bool| BuildPlan {
            name: "hello".into(),
            torch_dir: "/sp/torch".into(),
            python_include: Some("/py/include".into()),
            tvm_ffi: Some(TvmFfiBuild {
                include_dirs: vec!["/sp/tvm_ffi/include".into()],
                lib_dir: "/sp/tvm_ffi/lib".into(),
                uses_torch,
            }),
            ..Default::default()
        };
        let plain = tvm(false);
        let host = host_flags(&plain);
        assert!(host.contains(&"-std=c++17".to_string()) && host.contains(&"-O2".to_string()));
        assert!(host.contains(&"/sp/tvm_ffi/include".to_string()));
        assert!(
            !host
                .iter()
                .any(|f| f.contains("torch") && !f.contains("tvm_ffi")
                    || f.contains("TORCH")
                    || f.contains("GLIBCXX")
                    || f.contains("/py/include")),
            "{host:?}"
        );
        let link = link_argv(&plain, &host_only_toolchain(), &[], Path::new("o.so"));
        assert!(link.contains(&"-ltvm_ffi".to_string()));
        assert!(
            !link
                .iter()
                .any(|f| f.starts_with("-ltorch") || f.starts_with("-lc10")),
            "{link:?}"
        );
        // With a torch header: torch's includes, defines, standard and libraries too.
        let with_torch = tvm(true);
        let host = host_flags(&with_torch);
        assert!(
            host.contains(&CXX_STANDARD.to_string())
                && host.contains(&"/sp/torch/include".to_string())
        );
        assert!(host
            .iter()
            .any(|f| f.starts_with("-D_GLIBCXX_USE_CXX11_ABI=")));
        let link = link_argv(&with_torch, &host_only_toolchain(), &[], Path::new("o.so"));
        assert!(link.contains(&"-ltvm_ffi".to_string()) && link.contains(&"-ltorch".to_string()));
    }
}
