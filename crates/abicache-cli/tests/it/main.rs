//! The integration tests of `abicache-cli`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

#[macro_use]
mod common;

mod audit;
mod cache_wheel;
mod cli_reference;
mod compiler_environment;
mod computed_include;
mod cpu_muladd;
mod defaults;
mod distributed;
mod errors;
mod fleet;
mod hardening;
mod hardening_inputs;
mod isa;
mod matrix;
mod offline;
mod readonly_layers;
mod regression;
mod relocatable;
mod remote;
mod remote_objects;
mod run;
mod scan_key;
mod settings_up_front;
mod stable_and_cuda;
mod stable_floor;
mod store_safety;
