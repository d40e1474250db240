//! abicache-isa: instruction-set extensions, for x86-64 and AArch64.
//!
//! - [`flags`]: which compile flags ask for the host's CPU
//!   (`-march=native`, `-mcpu=native`, `-mtune=native`, in host flags and
//!   through nvcc's `-Xcompiler`) and which choose the target's
//!   instruction set (every `-m…` flag).
//! - [`requirements_from_macros`]: the extensions a library requires
//!   beyond the fixed [`BASELINE`] (`x86-64`, `armv8-a`), from the
//!   compiler's predefined macros with its flags, the compiler's own target
//!   included (the caller runs the compiler); [`beyond_baseline`] is the
//!   compiler's effective target, which the key carries.
//! - [`running_cpu`]: what this CPU supports, with no compiler (Linux's
//!   `/proc/cpuinfo`, and `cpuid` through the standard library on x86-64).
//! - [`check`]: the guard before a load, refusing a library this CPU
//!   cannot run with an [`IsaError`] that names the missing extensions and
//!   the flag that required them (`ABICACHE_ISA_CHECK=0` turns it off).
//!
//! Extensions are named as `/proc/cpuinfo` names them (`avx512_bf16`,
//! `amx_tile`, `sve2`); [`EXTENSIONS`] lists those understood.
//!
//! This crate sits low (it depends only on `abicache-env-vars`) so the
//! store (manifests and bundles carry [`Requirement`]s), the build (which
//! computes them), and the façade and Python bindings (which check them)
//! share one definition.
//!
//! ```
//! use abicache_isa::{check_on, CpuFeatures, Requirement};
//!
//! let cpu = CpuFeatures::from_cpuinfo("flags\t: fpu sse2 avx2\n");
//! let required = [Requirement { feature: "avx512_bf16".into(), flag: "-mavx512bf16".into() }];
//! let err = check_on(&required, &cpu, "`ops`").unwrap_err().to_string();
//! assert!(err.contains("built with -mavx512bf16; this CPU lacks avx512_bf16"), "{err}");
//! ```

#![deny(missing_docs)]

mod cpu;
pub mod flags;
mod guard;
mod require;
mod table;

pub use cpu::{running_cpu, CpuFeatures, CPUINFO, CPUINFO_READ, IDENTITY_FIELDS};
pub use guard::{check, check_on, guard_enabled, missing, IsaError};
pub use require::{
    beyond_baseline, defined_macros, requirements_from_macros, Requirement, BASELINE,
};
pub use table::{by_flag, by_macro, understood_flags, Arch, Extension, EXTENSIONS};
