//! The integration tests of `abicache`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod env_vars_page;
mod pch_bounds;
mod probe;
mod warm_key;
