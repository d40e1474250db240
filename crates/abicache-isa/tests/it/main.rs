//! The integration tests of `abicache-isa`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod aarch64;
mod docs_flags;
