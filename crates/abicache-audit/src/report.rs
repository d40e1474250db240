//! The audit report and the functions that produce it.

use std::fs::File;
use std::path::{Path, PathBuf};

use object::read::ReadCache;
use serde::{Deserialize, Serialize};

use crate::classify::{classify, Group};
use crate::elf::{self, DynamicFacts, ReadFailure};
use crate::error::AuditError;

/// What a shared library needs from the dynamic linker.
///
/// Serializes to exactly
/// `{"needed": [...], "imports": {...}, "glibcxx_max": "GLIBCXX_3.4.30" | null}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// The `DT_NEEDED` entries, in the order the file lists them.
    pub needed: Vec<String>,
    /// The undefined dynamic symbols, grouped by the library they come from.
    pub imports: Imports,
    /// The newest libstdc++ symbol version the library requires.
    ///
    /// The highest `GLIBCXX_x.y.z` in `.gnu.version_r`, compared numerically
    /// (`GLIBCXX_3.4.30` > `GLIBCXX_3.4.9`). `GLIBCXX_*` and `CXXABI_*` are
    /// separate series, so they are not compared with each other: the highest
    /// `CXXABI_x.y.z` is reported only when no `GLIBCXX_*` version is
    /// required. `None` when the library requires neither.
    pub glibcxx_max: Option<String>,
}

/// Undefined dynamic symbols by group: each list holds raw (mangled) names
/// without `@VERSION` suffixes, sorted and free of duplicates. See
/// [`crate::classify()`] for the rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Imports {
    /// The CPython C API.
    pub cpython: Vec<String>,
    /// `libtorch_python.so`: `THP*`, pybind11, `torch::python`.
    pub libtorch_python: Vec<String>,
    /// libtorch's unstable C++ API (`c10`, `at`, `torch`, `caffe2`).
    pub libtorch_cxx: Vec<String>,
    /// libtorch's stable C shim (`aoti_torch_*`, `torch_*`).
    pub torch_stable_c: Vec<String>,
    /// CUDA runtime, driver and libraries.
    pub cuda: Vec<String>,
    /// libstdc++ and the C++ ABI runtime.
    pub libstdcxx: Vec<String>,
    /// Everything else (libc, libm, libgcc, …).
    pub other: Vec<String>,
}

impl Imports {
    /// The symbols of one group.
    pub fn group(&self, group: Group) -> &[String] {
        match group {
            Group::Cpython => &self.cpython,
            Group::LibtorchPython => &self.libtorch_python,
            Group::LibtorchCxx => &self.libtorch_cxx,
            Group::TorchStableC => &self.torch_stable_c,
            Group::Cuda => &self.cuda,
            Group::Libstdcxx => &self.libstdcxx,
            Group::Other => &self.other,
        }
    }

    fn group_mut(&mut self, group: Group) -> &mut Vec<String> {
        match group {
            Group::Cpython => &mut self.cpython,
            Group::LibtorchPython => &mut self.libtorch_python,
            Group::LibtorchCxx => &mut self.libtorch_cxx,
            Group::TorchStableC => &mut self.torch_stable_c,
            Group::Cuda => &mut self.cuda,
            Group::Libstdcxx => &mut self.libstdcxx,
            Group::Other => &mut self.other,
        }
    }

    /// The number of symbols in all groups together.
    pub fn len(&self) -> usize {
        Group::ALL.iter().map(|&g| self.group(g).len()).sum()
    }

    /// Whether no group holds a symbol.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl AuditReport {
    /// Whether `DT_NEEDED` names `libtorch_python.so` (any suffix).
    pub fn needs_libtorch_python(&self) -> bool {
        self.needed
            .iter()
            .any(|n| n.starts_with("libtorch_python."))
    }

    /// Whether `DT_NEEDED` names a `libpython*` (e.g. `libpython3.11.so.1.0`).
    pub fn needs_libpython(&self) -> bool {
        self.needed.iter().any(|n| n.starts_with("libpython"))
    }

    /// The imports that tie the library to one Python ABI: the `cpython`
    /// symbols, then the `libtorch_python` ones. Empty for a library that
    /// may be shared between Python versions (check
    /// [`needs_libpython`](Self::needs_libpython) and
    /// [`needs_libtorch_python`](Self::needs_libtorch_python) too).
    pub fn python_symbols(&self) -> Vec<&str> {
        let i = &self.imports;
        i.cpython
            .iter()
            .chain(&i.libtorch_python)
            .map(String::as_str)
            .collect()
    }

    /// The imports from libtorch that are outside its stable C ABI: the
    /// `libtorch_cxx` symbols, then the `libtorch_python` ones. Empty for a
    /// library that keeps to the stable ABI (`torch_stable_c` only).
    pub fn non_stable_torch_symbols(&self) -> Vec<&str> {
        let i = &self.imports;
        i.libtorch_cxx
            .iter()
            .chain(&i.libtorch_python)
            .map(String::as_str)
            .collect()
    }

    fn from_facts(facts: DynamicFacts) -> AuditReport {
        let mut imports = Imports::default();
        for symbol in facts.undefined {
            let group = classify(&symbol.name, symbol.version.as_deref());
            imports.group_mut(group).push(symbol.name);
        }
        for group in Group::ALL {
            let list = imports.group_mut(group);
            list.sort_unstable();
            list.dedup();
        }
        AuditReport {
            needed: facts.needed,
            imports,
            glibcxx_max: glibcxx_max(&facts.version_needs),
        }
    }
}

/// The highest `GLIBCXX_*` version, else the highest `CXXABI_*` one.
fn glibcxx_max(versions: &[String]) -> Option<String> {
    highest(versions, "GLIBCXX_").or_else(|| highest(versions, "CXXABI_"))
}

fn highest(versions: &[String], prefix: &str) -> Option<String> {
    versions
        .iter()
        .filter_map(|v| {
            let numbers: Option<Vec<u64>> = v
                .strip_prefix(prefix)?
                .split('.')
                .map(|part| part.parse().ok())
                .collect();
            Some((numbers?, v))
        })
        .max()
        .map(|(_, v)| v.clone())
}

/// Audits the ELF shared library at `path`.
///
/// Reads the file lazily: only the ELF header, the section headers, the
/// dynamic section, `.dynsym`, `.dynstr` and the symbol-version sections are
/// read, never the code. Never panics; a file that is not ELF, is truncated or
/// malformed, or cannot be read is an [`AuditError`] naming `path`.
pub fn audit_file(path: &Path) -> Result<AuditReport, AuditError> {
    let io = |source| AuditError::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let cache = ReadCache::new(file);
    let result = elf::read(&cache);
    if result.is_err() {
        // `ReadCache` reports I/O failures as malformed data: re-check that the
        // file is still readable to give the real reason.
        let mut file = cache.into_inner();
        check_readable(&mut file, size).map_err(io)?;
    }
    result
        .map(AuditReport::from_facts)
        .map_err(|failure| to_error(path.to_owned(), failure))
}

/// Audits an ELF shared library held in memory. Errors name the path
/// `<in-memory>`. Never panics.
pub fn audit_bytes(bytes: &[u8]) -> Result<AuditReport, AuditError> {
    elf::read(bytes)
        .map(AuditReport::from_facts)
        .map_err(|failure| to_error(PathBuf::from("<in-memory>"), failure))
}

fn check_readable(file: &mut File, size: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(0))?;
    let mut head = [0u8; 1];
    if size > 0 {
        file.read_exact(&mut head)?;
    }
    Ok(())
}

fn to_error(path: PathBuf, failure: ReadFailure) -> AuditError {
    match failure {
        ReadFailure::NotElf(head) => AuditError::NotElf {
            path,
            found: describe_head(&head),
        },
        ReadFailure::Malformed(reason) => AuditError::Malformed { path, reason },
    }
}

/// `is empty` or `starts with 23 21 2f 62 ("#!/b")`.
fn describe_head(head: &[u8]) -> String {
    if head.is_empty() {
        return "is empty".to_owned();
    }
    let shown = &head[..head.len().min(4)];
    let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "starts with {} (\"{}\"), not the ELF magic 7f 45 4c 46 (\"\\x7fELF\")",
        hex.join(" "),
        shown.escape_ascii()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibcxx_max_compares_numerically_and_prefers_glibcxx() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            glibcxx_max(&v(&[
                "GLIBCXX_3.4.9",
                "GLIBCXX_3.4.30",
                "CXXABI_1.3.13",
                "GLIBC_2.34"
            ])),
            Some("GLIBCXX_3.4.30".into())
        );
        assert_eq!(
            glibcxx_max(&v(&["CXXABI_1.3", "CXXABI_1.3.9", "CXXABI_TM_1"])),
            Some("CXXABI_1.3.9".into())
        );
        assert_eq!(glibcxx_max(&v(&["GLIBC_2.2.5"])), None);
    }

    #[test]
    fn describe_head_escapes_bytes() {
        assert_eq!(describe_head(b""), "is empty");
        assert_eq!(
            describe_head(b"#!/bin/sh"),
            "starts with 23 21 2f 62 (\"#!/b\"), not the ELF magic 7f 45 4c 46 (\"\\x7fELF\")"
        );
    }
}
