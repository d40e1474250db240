//! The integration tests of `abicache-test-support`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod alone;
mod run_time_paths;
