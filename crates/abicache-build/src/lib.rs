//! abicache-build: turns a [`BuildPlan`] into a shared library.
//!
//! - [`Toolchain::discover`] finds the host compiler, `nvcc` (CUDA toolkit, `PATH` or
//!   NVIDIA's pip wheels) and an optional launcher, and reports their versions.
//! - [`flags`] computes compile and link command lines the way
//!   `torch.utils.cpp_extension` does for the same torch (differences documented there).
//! - [`build`] compiles the units in parallel through a content-addressed object cache
//!   (editing one source recompiles one unit; a unit shared by two plans with the same
//!   flags compiles once), links `<name>.so`, writes `compile_commands.json`, and reports
//!   [`Progress`] events; [`progress_reporter`] renders them.
//! - With a fingerprint root ([`BuildPlan::root`]) objects are relocatable: compiled there
//!   with relative paths and `-ffile-prefix-map`, keyed without the checkout's location.
//! - [`pch`]: units that start with an umbrella header (`torch/extension.h`) compile
//!   against a precompiled header when the caller has one ([`ReadyPch`]); a rejected one
//!   is detected, never silently ignored.
//! - [`resolve_host_cpu`] resolves `-march=native` on this machine (remembered per
//!   compiler and CPU); [`isa_requirements`] reads which instruction-set extensions a
//!   library's target flags require.
//!
//! This crate knows nothing of keys or specs: the caller fills the plain-data
//! [`BuildPlan`]. Of the store it uses only the object cache
//! ([`abicache_store::ObjectCache`]), which verifies every reused object before it is
//! linked. All failures are one [`BuildError`].
//!
//! ```
//! use abicache_build::{plain_line, progress_json, shell_join, Progress};
//!
//! let event = Progress::UnitDone { done: 2, total: 4, source: "ops.cpp".into(), seconds: 1.25 };
//! assert_eq!(plain_line(&event), "[2/4] compiled ops.cpp (1.2s)");
//! // What a Python progress callback receives: tagged by `kind`, with its line.
//! let json = progress_json(&event).unwrap();
//! assert_eq!((json["kind"].as_str(), json["done"].as_u64()), (Some("unit_done"), Some(2)));
//! // Command lines are shown quoted for a POSIX shell.
//! assert_eq!(shell_join(["c++", "-DNAME=a b"]), "c++ '-DNAME=a b'");
//! ```
#![deny(missing_docs)]

mod compile;
mod cuda_phases;
mod error;
pub mod flags;
mod jobs;
mod launch_dir;
pub mod memory;
pub mod pch;
mod progress;
mod quote;
mod run;
mod target;
mod toolchain;
mod unit_objects;

pub use compile::{
    build, build_with_device_steps, BuildOptions, BuildReport, DeviceSteps, ReadyPch,
    OBJECT_KEY_FORMAT,
};
pub use cuda_phases::{DeviceStepSource, DEVICE_STEP_FORMAT, DEVICE_STEP_SUFFIX};
pub use error::{BuildError, KilledCompile};
pub use flags::{BuildPlan, CompileCommand, TvmFfiBuild, Unit, UnitKind};
pub use jobs::{
    capped_jobs, job_limit, jobs_from, jobs_from_env, local_cores, parse_max_jobs, JobLimit,
    JobRequest, JOBS_PER_CORE, JOBS_PER_CORE_WITH_LAUNCHER,
};
pub use pch::{pch_requests, spawn_background_build, PchRequest, PchSlot};
pub use progress::{plain_line, progress_json, progress_reporter, Progress, ProgressMode};
pub use quote::{shell_join, shell_quote};
pub use run::{run_captured, Cancel, Captured, RunFailure, RunLimits, SECRET_VARIABLES};
pub use target::{
    host_cpu_compiler, isa_requirements, parse_resolved_target, resolve_compiler_isa,
    resolve_host_cpu,
};
pub use toolchain::{
    find_cxx, find_nvcc, launcher_compiles_cuda, launcher_distributes, parse_nvcc_release, which,
    Nvcc, Tool, Toolchain, ToolchainEnv,
};
pub use unit_objects::{unit_objects, UnitObject};
