//! The integration tests of `abicache-store`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod bundle;
mod common;
mod hardening;
mod pch;
mod processes;
mod readonly;
mod shared;
mod store;
