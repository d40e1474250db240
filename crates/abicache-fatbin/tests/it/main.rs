//! The crate's one test binary.

mod compatibility;
mod flags;
mod malformed;
mod names;
mod nvidia_agreement;
mod support;
