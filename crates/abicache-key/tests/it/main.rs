//! The integration tests of `abicache-key`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod end_to_end;
mod files;
mod host_cpu;
mod key;
