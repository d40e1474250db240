//! The integration tests of `abicache-fleet`: one test binary, each file a
//! module (one binary links the dependencies once; see docs/development.md).

mod gate;
mod probe;
