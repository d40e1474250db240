//! The integration tests of `abicache-remote`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod client;
