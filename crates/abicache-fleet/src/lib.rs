//! abicache-fleet: the fleet tools over abicache's load pipeline.
//!
//! [`prebuild()`] keys a matrix of extensions × environments and builds
//! each distinct key once ([`matrix`] creates the environments of a
//! `python=… torch=…` matrix with `uv`; [`probe_interpreter`] reads an
//! interpreter's environment without importing torch); [`bundle`] exports
//! entries as one signed file and imports one only after verifying all of
//! it; [`wheel`] ships entries as a pip-installable cache wheel, which the
//! load pipeline uses as a read-only layer ([`abicache::layers`]); [`plan`]
//! records what a run loaded and lays it out again for a prebuild.
//!
//! Its errors are its own ([`Error`]); a failure of the load pipeline is
//! [`Error::Core`], with the message and [`abicache::ErrorKind`] it has there.

#![deny(missing_docs)]

pub mod bundle;
mod error;
pub mod fleet;
pub mod matrix;
pub mod partial;
pub mod plan;
mod prebuild;
mod probe;
pub mod wheel;

pub use error::{Error, MatrixError, Result};
pub use fleet::{build_each_key_once, render_coverage, Coverage, FleetEnvironment, FleetExtension};
pub use matrix::{Matrix, MatrixEnvironments, MatrixOptions};
pub use prebuild::{prebuild, PrebuildRequest};
pub use probe::{
    probe_interpreter, probe_timeout_from_env, ProbedInterpreter, DEFAULT_PROBE_TIMEOUT,
};
