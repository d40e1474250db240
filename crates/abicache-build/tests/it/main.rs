//! The integration tests of `abicache-build`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod build;
mod cuda_device_steps;
mod object_cache;
mod relocatable_pch;
