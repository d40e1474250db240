//! The result of a scan: plain data, serialisable, in a deterministic order.

use std::sync::Arc;

use serde::Serialize;

/// One file the scan visited, identified location-independently.
///
/// `path` is relative to the fingerprint root (POSIX separators) when the
/// file lies under it, else its absolute canonical path. Both strings are
/// shared: a header every source reaches is one allocation, not one per
/// visit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScannedFile {
    /// Display path (relative to the root when under it).
    pub path: Arc<str>,
    /// Lower-case hex BLAKE3 of the file's bytes.
    pub blake3: Arc<str>,
}

/// A fact found at one place in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// Display path of the file (as in [`ScannedFile::path`]).
    pub file: String,
    /// 1-based line number.
    pub line: u32,
}

/// Evidence that an extension touches the CPython ABI (docs/key.md, step 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PythonMarker {
    /// Display path of the file with the marker.
    pub file: String,
    /// 1-based line of the marker.
    pub line: u32,
    /// The marker as found: `#include <Python.h>`, `PyLong_FromLong`,
    /// `py::`, `PYBIND11_MODULE`, `REGISTER_EXTENSION(`, or
    /// `#include MACRO` for a computed include.
    pub marker: String,
}

/// An `#include` of a torch header (`torch/…`, `ATen/…`, `c10/…`, `caffe2/…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TorchInclude {
    /// Display path of the including file.
    pub file: String,
    /// 1-based line of the include directive.
    pub line: u32,
    /// The include name as written, e.g. `ATen/ATen.h`.
    pub include: String,
    /// True when the header belongs to the libtorch stable ABI
    /// (`torch/csrc/stable/…` or `torch/headeronly/…`).
    pub stable: bool,
}

/// An `#include MACRO` whose target cannot be known without preprocessing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputedInclude {
    /// Display path of the including file.
    pub file: String,
    /// 1-based line of the directive.
    pub line: u32,
    /// The directive's operand as written (e.g. `KERNEL_HEADER`).
    pub text: String,
}

/// Everything the fingerprint needs about one source (translation unit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceReport {
    /// Display path of the source itself.
    pub source: String,
    /// The source and every local header it reaches, each once,
    /// depth-first in include order (the source first).
    pub files: Vec<ScannedFile>,
    /// Quoted includes that resolved nowhere, as `FILE:name`, in visit order.
    pub missing_includes: Vec<String>,
    /// Computed includes reached from this source, in visit order.
    pub computed_includes: Vec<ComputedInclude>,
    /// Whether any visited file of this source uses the identifier
    /// `TORCH_EXTENSION_NAME` (torch's own headers do not), i.e. whether the
    /// unit's object depends on the extension's name.
    pub uses_extension_name: bool,
}

/// The result of scanning all sources of one extension.
///
/// Every list is in a deterministic order: sources in the order given,
/// files depth-first in include order, facts in file-then-line order of
/// first visit. Each distinct file contributes its facts once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    /// One entry per source, in the order given.
    pub sources: Vec<SourceReport>,
    /// Python-ABI markers outside comments and literals (docs/key.md, step 2).
    pub python_markers: Vec<PythonMarker>,
    /// Every torch header included by a visited file.
    pub torch_includes: Vec<TorchInclude>,
    /// Where `STABLE_TORCH_LIBRARY*` registrations appear.
    pub stable_registrations: Vec<Location>,
}

impl ScanReport {
    /// True when any visited file carries a Python-ABI marker or a computed
    /// include (docs/key.md, step 2; detection only; overrides are the key's business).
    pub fn python_abi_dependent(&self) -> bool {
        !self.python_markers.is_empty()
    }

    /// True when a `STABLE_TORCH_LIBRARY*` registration was seen.
    pub fn stable_registration(&self) -> bool {
        !self.stable_registrations.is_empty()
    }

    /// Torch includes outside the stable ABI, in visit order.
    pub fn non_stable_headers(&self) -> impl Iterator<Item = &TorchInclude> {
        self.torch_includes.iter().filter(|t| !t.stable)
    }

    /// True when the sources look like a stable-ABI extension: a stable
    /// registration and only stable torch headers (reported, never acted on).
    pub fn stable_candidate(&self) -> bool {
        self.stable_registration() && self.non_stable_headers().next().is_none()
    }

    /// Every distinct visited file, in first-visit order across sources.
    pub fn unique_files(&self) -> Vec<&ScannedFile> {
        let mut seen = std::collections::HashSet::new();
        self.sources
            .iter()
            .flat_map(|s| s.files.iter())
            .filter(|f| seen.insert(&*f.path))
            .collect()
    }
}
