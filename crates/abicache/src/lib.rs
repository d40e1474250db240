//! abicache: build, cache and load JIT-compiled PyTorch extensions under a
//! key that reflects what each binary really depends on.
//!
//! This crate is the façade the command line and the Python bindings call:
//! a [`Session`] (one environment, one cache) runs spec + environment →
//! scan → key → store (hit?) → build → audit → publish. It guarantees that
//! a returned library was verified against its manifest, was audited
//! against its key before it was published, and that one key is built at
//! most once at a time across processes.
//!
//! For fleets: [`prebuild`] keys a matrix of extensions × environments and
//! builds each distinct key once ([`matrix`] creates the
//! environments of a `python=… torch=…` matrix with `uv`); [`bundle`] exports entries as one signed
//! file and imports one only after verifying all of it; [`wheel`] ships
//! entries as a pip-installable cache wheel, used as a read-only [`layers`] layer.
//!
//! ```
//! use abicache::key::{Environment, ExtensionSpec, StableTarget};
//! use abicache::{ErrorKind, Session};
//!
//! // A stable-ABI target above the running torch is refused by the session's
//! // checks before the cache is opened: nothing is created on disk.
//! let env = Environment::parse("python_version = \"3.12.9\"\ntorch_version = \"2.9.1\"\ncxx11_abi = true\n",
//!                              std::path::Path::new("env.toml")).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let cache = dir.path().join("cache");
//! let session = Session::open_lazily(Some(cache.clone()), env);
//! let spec = ExtensionSpec::new("ext", ["ops.cpp"])
//!     .with_torch_stable_abi_target(Some(StableTarget::new(2, 10)));
//! assert_eq!(session.check(&spec).unwrap_err().kind(), ErrorKind::Abi);
//! assert!(!cache.exists());
//! ```

#![deny(missing_docs)]

mod audit;
pub mod bundle;
pub mod env_vars;
mod error;
mod explain;
pub mod fleet;
mod gpu;
pub mod layers;
pub mod matrix;
pub mod pch;
mod prebuild;
mod probe;
mod remote;
mod remote_objects;
mod session;
mod warning;
pub mod wheel;

pub use audit::{audit_against_key, check as check_audit, AuditVerdict};
pub use error::{os_errno, BundleRefusal, Error, ErrorKind, Result, TorchDirProblem};
pub use explain::{explain, render_explanation, ClosestEntry, Explanation};
pub use fleet::{prebuild, render_coverage, Coverage, FleetEnvironment, FleetExtension};
pub use gpu::{default_cuda_archs, visible_gpu_archs};
pub use matrix::{Matrix, MatrixEnvironments, MatrixOptions};
pub use pch::PchMode;
pub use prebuild::{prebuild_fleet, PrebuildRequest};
pub use probe::{
    probe_interpreter, probe_timeout_from_env, ProbedInterpreter, DEFAULT_PROBE_TIMEOUT,
};
pub use remote::{trusted_signers, Pulled, RemoteCache};
/// The warm-load record's format and writer's rules (its one definition).
pub use session::warm_load as warm_record;
pub use session::{
    key_memos, Outcome, Prepared, RememberedKey, Session, SessionOptions, WARM_RECORD_FORMAT,
};
pub use warning::Warning;

pub use abicache_audit as audit_crate;
pub use abicache_build as build;
pub use abicache_isa as isa;
pub use abicache_key as key;
pub use abicache_remote as remote_crate;
pub use abicache_scan as scan;
pub use abicache_settings as settings;
pub use abicache_store as store;
