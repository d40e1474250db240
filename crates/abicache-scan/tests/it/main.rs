//! The integration tests of `abicache-scan`: one test binary, each file a module
//! (one binary links the dependencies once; see docs/development.md).

mod computed;
mod key_memo;
mod lexer;
mod lexer_differential;
mod listing;
mod proptest;
mod regression;
mod scan;
mod stat_cache;
