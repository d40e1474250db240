//! The crate's one test binary.

mod flags;
mod nvidia_agreement;
mod support;
