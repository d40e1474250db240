//! The integration tests of `abicache`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod env_vars_page;
mod key_code_fingerprint;
mod pch_bounds;
mod pch_slots_owner;
mod warm_key;
mod wheel_layer_warning;
