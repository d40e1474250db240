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
//!
//! ```
//! use abicache_audit::{classify, demangle, Group};
//!
//! // A libtorch C++ function, a CPython API call, a libstdc++ import.
//! assert_eq!(classify("_ZN2at4_ops3add4callERKNS_6TensorES4_RKN3c106ScalarE", None), Group::LibtorchCxx);
//! assert_eq!(classify("PyLong_FromLong", None), Group::Cpython);
//! assert_eq!(classify("_ZdlPv", Some("GLIBCXX_3.4")), Group::Libstdcxx);
//! assert_eq!(demangle("_ZN3c105ErrorD2Ev"), "c10::Error::~Error()");
//!
//! // A file that is not ELF is an error naming it, never a panic.
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("lib.so");
//! std::fs::write(&path, b"not an ELF file").unwrap();
//! let err = abicache_audit::audit_file(&path).unwrap_err();
//! assert!(err.to_string().contains(&format!("`{}`", path.display())), "{err}");
//! ```
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
