//! ELF inspection of a built shared library: what it really imports.
//!
//! [`audit_file`] reads only the parts of an ELF file it needs (headers, the
//! dynamic section, `.dynsym`/`.dynstr` and the symbol-version sections), so
//! auditing a several-hundred-megabyte `libtorch_cpu.so` stays well under a
//! second. The result, an [`AuditReport`], lists the library's `DT_NEEDED`
//! entries, its undefined dynamic symbols sorted into [`Imports`] groups (see
//! [`classify`] for the rules and their order) and the newest libstdc++
//! symbol version it needs.
//!
//! Guarantees: no function in this crate panics on any input, whatever the
//! bytes; a file that is not ELF, or is truncated or malformed, is an
//! [`AuditError`] naming its path.
#![deny(missing_docs)]

mod classify;
mod demangle;
mod elf;
mod error;
mod render;
mod report;

pub use classify::{classify, Group};
pub use demangle::demangle;
pub use error::AuditError;
pub use render::render_human;
pub use report::{audit_bytes, audit_file, AuditReport, Imports};
