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
//! The fleet tools (prebuild of a matrix, interpreter probes, bundles and
//! cache wheels) are the `abicache-fleet` crate, over this one; an entry
//! they ship is used here as a read-only [`layers`] layer.
//! Every entry from outside the local cache (a layer, a cache wheel, the
//! remote cache, a bundle) passes the [`gate`] first, and is refused in one
//! wording per reason ([`Refused`]).
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
//! assert_eq!(session.validate_spec(&spec).unwrap_err().kind(), ErrorKind::Abi);
//! assert!(!cache.exists());
//! ```

#![deny(missing_docs)]

pub mod covering;
pub mod env_vars;
mod error;
mod explain;
pub mod gate;
mod gpu;
mod gpu_refusal;
mod key_audit;
pub mod key_code;
pub mod layers;
pub mod misses;
pub mod pch;
mod prepared;
mod remote_cache;
mod remote_objects;
mod session;
mod warning;

pub use error::{os_errno, Error, ErrorKind, Result, TorchDirProblem};
pub use explain::{explain, render_closest, render_explanation, ClosestEntry, Explanation};
pub use gate::{Refusal, Refused};
pub use gpu::{
    check_device_code, default_cuda_archs, gpu_check_enabled, machine_gpus, visible_among,
    visible_gpu_archs, visible_gpus, Gpu, GpuRefusal, GpuVerdict,
};
pub use key_audit::{audit_against_key, refusal_under_key, AuditVerdict};
pub use misses::{CacheMiss, MissReason};
pub use pch::PchMode;
pub use prepared::Prepared;
pub use remote_cache::{trusted_signers, Pulled, RemoteCache};
/// The warm-load record's format and writer's rules (its one definition).
pub use session::warm_load;
pub use session::{key_memos, Outcome, RememberedKey, Session, SessionOptions, WARM_RECORD_FORMAT};
pub use warning::Warning;

pub use abicache_audit as audit;
pub use abicache_build as build;
pub use abicache_fatbin as fatbin;
pub use abicache_isa as isa;
pub use abicache_key as key;
pub use abicache_remote as remote;
pub use abicache_scan as scan;
pub use abicache_settings as settings;
pub use abicache_store as store;
