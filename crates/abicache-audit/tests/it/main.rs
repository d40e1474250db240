//! The integration tests of `abicache-audit`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod malformed;
mod real_libraries;
mod support;
