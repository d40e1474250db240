//! Source scanning for abicache (docs/key.md, steps 1–2).
//!
//! Given the sources of one extension, visits each source and, iteratively,
//! the local headers it includes (each file once per source; read, hashed
//! with BLAKE3 and lexed once per scan, however many sources include it),
//! and reports per-source file lists, missing and computed includes,
//! Python-ABI evidence and torch-header facts. Text inside comments and
//! string or character literals is never an include or a marker.
//!
//! The crate reads files; it knows nothing of torch versions or caches.
//!
//! - [`lexer`]: the C/C++ lexer ([`lex`] → [`FileFacts`]);
//! - [`macros`]: computed includes resolved by expanding the macros of the
//!   visited files and `-D` flags ([`MacroTable`]);
//! - [`resolve`]: include resolution ([`Resolver`]);
//! - [`scan()`]: the walk, producing a [`ScanReport`];
//! - [`stat_cache`]: per-file facts remembered by stat stamp, so a warm
//!   [`scan_cached`] stats files instead of reading them;
//! - [`deps`] and [`key_memo`]: what a scan's report depends on, recorded
//!   by [`scan_recorded`], so a caller can remember a key per input digest
//!   and answer it again with one `stat` per dependency ([`KeyMemo`]);
//! - [`render_summary`]: the human summary shown by `abicache scan`.
//!
//! ```
//! use abicache_scan::{lex, IncludeKind};
//!
//! let facts = lex(b"#include <torch/extension.h>\n// #include \"commented.h\"\nconst char* s = \"py::\";\n");
//! assert_eq!(facts.includes.len(), 1); // the comment's include is not one
//! assert_eq!(facts.includes[0].kind, IncludeKind::Angle);
//! // The include is a Python-ABI marker; the `py::` inside a string literal is not.
//! assert_eq!(facts.python_markers, vec![(1, "#include <torch/extension.h>".to_string())]);
//! ```

#![deny(missing_docs)]

mod absent;
pub mod deps;
mod error;
mod fast_hash;
mod join;
pub mod key_memo;
pub mod lexer;
mod lexer_skip;
mod listing;
pub mod macros;
mod report;
pub mod resolve;
mod scan;
pub mod stat_cache;
mod summary;

pub use deps::{Dependencies, Expect};
pub use error::ScanError;
pub use key_memo::KeyMemo;
pub use lexer::{lex, FileFacts, Include, IncludeKind};
pub use macros::{defines_in_flags, Defines, Expansion, MacroDef, MacroTable};
pub use report::{
    ComputedInclude, Location, PythonMarker, ScanReport, ScannedFile, SourceReport, TorchInclude,
};
pub use resolve::{Resolution, Resolver};
pub use scan::{
    is_stable_header, is_torch_header, scan, scan_cached, scan_learning, scan_recorded, ScanConfig,
    ScanLearnt,
};
pub use stat_cache::{StatCache, StatCacheStats, SCANNER_FINGERPRINT};
pub use summary::render_summary;
