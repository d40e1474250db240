//! The payload and its key (SPEC §6).
//!
//! # Payload format (`format=1`)
//!
//! The payload is UTF-8 text, one `field=value` per line, each line ending in
//! `\n`, in this fixed order (lines marked *CUDA* appear only for an extension
//! that `requires_cuda`; `*` marks a line repeated once per item, possibly
//! zero times):
//!
//! ```text
//! format=1
//! name=<name>
//! namespace=<namespace, default name>
//! required_ops=<ops joined by ",", as given>
//! python_abi=agnostic                  | python_abi=<SOABI>
//!                                        (no SOABI: cpython-<maj>.<min><abiflags>)
//! torch_abi=stable-<M>.<m>             | torch=<version>
//!                                        (CUDA: the full version; CPU: local part
//!                                         stripped when cpu, cuNNN, rocmX.Y[.Z], xpu)
//! torch_cuda=<torch.version.cuda or none>              CUDA
//! cxx11_abi=<0|1>
//! cuda_archs=<sorted, de-duplicated -gencode flags joined by " ">   CUDA
//! nvcc=<nvcc major.minor>                              CUDA
//! source=<display path>                *  per source, in the order given, then:
//! file=<blake3 hex> <display path>     *    the source and each local header it reaches
//! missing_include=<FILE>:<name>        *    quoted includes that resolve nowhere
//! computed_include=<FILE>:<line>:<text>*    #include MACRO
//! cflag=<flag>                         *  extra_cflags, then the stable-target define
//! cuda_cflag=<flag>                    *  CUDA: extra_cuda_cflags (without nvcc
//!                                         --threads / -t / --split-compile[-extended]
//!                                         and their values), then the define
//! include_path=<display path>          *  extra_include_paths
//! ldflag=<flag>                        *  extra_ldflags
//! ```
//!
//! A display path is relative to the fingerprint root with `/` separators
//! when the file is under the root, else absolute; so moving a checkout does
//! not change the key. In values, `\` is written `\\`, a newline `\n` and a
//! carriage return `\r`, so one field is always one line.
//!
//! The key is the first 128 bits of the BLAKE3 hash of the payload text, as
//! 32 lower-case hex digits. Any change to what goes into the payload bumps
//! [`KEY_FORMAT`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use abicache_scan::ScanReport;
use serde::Serialize;

use crate::arch;
use crate::env::Environment;
use crate::spec::ExtensionSpec;
use crate::version::TorchVersion;
use crate::KeyError;

/// Version of the payload format; the first line of every payload.
pub const KEY_FORMAT: u32 = 1;

/// Number of hex digits in a key (128 bits).
pub const KEY_HEX_LEN: usize = 32;

const LIST_FIELDS: &[&str] = &["cflag", "cuda_cflag", "include_path", "ldflag"];

/// The ordered `field=value` lines a key is the hash of.
///
/// Serializes as the list of its [`lines`](Self::lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    entries: Vec<(String, String)>,
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.lines())
    }
}

impl Payload {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    fn push(&mut self, field: &str, value: impl AsRef<str>) {
        self.entries
            .push((field.to_string(), escape(value.as_ref())));
    }

    /// Reads a stored payload text back (e.g. to [`diff`](Self::diff) it);
    /// a line without `=` is [`KeyError::InvalidPayload`].
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let entries = text
            .lines()
            .enumerate()
            .map(|(i, line)| {
                line.split_once('=')
                    .map(|(f, v)| (f.to_string(), v.to_string()))
                    .ok_or_else(|| KeyError::InvalidPayload {
                        line: i + 1,
                        text: line.to_string(),
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// The `(field, escaped value)` pairs, in payload order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// The value of the first line with this field, if any (escaped).
    pub fn get(&self, field: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_str())
    }

    /// The lines, `field=value`, without line terminators.
    pub fn lines(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|(f, v)| format!("{f}={v}"))
            .collect()
    }

    /// The exact text that is hashed: lines joined by `\n`, with a trailing `\n`.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (f, v) in &self.entries {
            s.push_str(f);
            s.push('=');
            s.push_str(v);
            s.push('\n');
        }
        s
    }

    /// 32 lower-case hex digits: the first 128 bits of BLAKE3 of [`text`](Self::text).
    pub fn key(&self) -> String {
        let hash = blake3::hash(self.text().as_bytes());
        hash.to_hex()[..KEY_HEX_LEN].to_string()
    }

    /// What changed from `self` (old) to `other` (new), field by field:
    /// scalar fields old → new, sources added or removed, files added,
    /// removed or changed per source, and list fields (flags, include paths)
    /// whose items differ. Empty when the payloads are equal.
    pub fn diff(&self, other: &Payload) -> Vec<FieldChange> {
        let (a, b) = (Sections::of(self), Sections::of(other));
        let mut out = Vec::new();
        let mut fields: Vec<&String> = a.scalars.iter().map(|(f, _)| f).collect();
        fields.extend(
            b.scalars
                .iter()
                .map(|(f, _)| f)
                .filter(|f| a.scalar(f).is_none()),
        );
        for f in fields {
            match (a.scalar(f), b.scalar(f)) {
                (Some(o), Some(n)) if o != n => out.push(FieldChange::Changed {
                    field: f.clone(),
                    old: o.into(),
                    new: n.into(),
                }),
                (Some(o), None) => out.push(FieldChange::Removed {
                    field: f.clone(),
                    value: o.into(),
                }),
                (None, Some(n)) => out.push(FieldChange::Added {
                    field: f.clone(),
                    value: n.into(),
                }),
                _ => {}
            }
        }
        for s in &a.sources {
            if !b.sources.iter().any(|t| t.name == s.name) {
                out.push(FieldChange::SourceRemoved {
                    source: s.name.clone(),
                });
            }
        }
        for s in &b.sources {
            match a.sources.iter().find(|t| t.name == s.name) {
                None => out.push(FieldChange::SourceAdded {
                    source: s.name.clone(),
                }),
                Some(old) => old.diff(s, &mut out),
            }
        }
        let names = |x: &Sections| x.sources.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        if a.sources.len() == b.sources.len()
            && names(&a) != names(&b)
            && a.sources
                .iter()
                .all(|s| b.sources.iter().any(|t| t.name == s.name))
        {
            out.push(FieldChange::Reordered {
                what: "sources".into(),
            });
        }
        for field in LIST_FIELDS {
            let (o, n) = (a.list(field), b.list(field));
            if o != n {
                out.push(FieldChange::ListChanged {
                    field: field.to_string(),
                    old: o,
                    new: n,
                });
            }
        }
        out
    }
}

/// One difference between two payloads, for `abicache explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FieldChange {
    /// A single-valued field changed.
    Changed {
        /// Field name, e.g. `torch`.
        field: String,
        /// Old value.
        old: String,
        /// New value.
        new: String,
    },
    /// A field only the new payload has (e.g. `torch_abi` replacing `torch`).
    Added {
        /// Field name (or `missing_include` / `computed_include`).
        field: String,
        /// Its value.
        value: String,
    },
    /// A field only the old payload has.
    Removed {
        /// Field name (or `missing_include` / `computed_include`).
        field: String,
        /// Its value.
        value: String,
    },
    /// A source only the new payload has.
    SourceAdded {
        /// Its display path.
        source: String,
    },
    /// A source only the old payload has.
    SourceRemoved {
        /// Its display path.
        source: String,
    },
    /// A file's content changed.
    FileChanged {
        /// The source that reaches it.
        source: String,
        /// The file's display path.
        file: String,
        /// Old BLAKE3.
        old: String,
        /// New BLAKE3.
        new: String,
    },
    /// A source now reaches a file it did not.
    FileAdded {
        /// The source.
        source: String,
        /// The file's display path.
        file: String,
    },
    /// A source no longer reaches a file.
    FileRemoved {
        /// The source.
        source: String,
        /// The file's display path.
        file: String,
    },
    /// Same items, different order (sources, or a source's files).
    Reordered {
        /// `sources` or `files of SOURCE`.
        what: String,
    },
    /// A repeated field (`cflag`, `cuda_cflag`, `include_path`, `ldflag`) differs.
    ListChanged {
        /// Field name.
        field: String,
        /// Old items in order.
        old: Vec<String>,
        /// New items in order.
        new: Vec<String>,
    },
}

impl fmt::Display for FieldChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Changed { field, old, new } => write!(f, "{field}: {old} -> {new}"),
            Self::Added { field, value } => write!(f, "{field}: added {value}"),
            Self::Removed { field, value } => write!(f, "{field}: removed {value}"),
            Self::SourceAdded { source } => write!(f, "source added: {source}"),
            Self::SourceRemoved { source } => write!(f, "source removed: {source}"),
            Self::FileChanged {
                source,
                file,
                old,
                new,
            } => {
                let short = |h: &str| h.chars().take(12).collect::<String>();
                write!(
                    f,
                    "file changed: {file} (via {source}) {} -> {}",
                    short(old),
                    short(new)
                )
            }
            Self::FileAdded { source, file } => write!(f, "file added: {file} (via {source})"),
            Self::FileRemoved { source, file } => write!(f, "file removed: {file} (via {source})"),
            Self::Reordered { what } => write!(f, "reordered: {what}"),
            Self::ListChanged { field, old, new } => {
                write!(f, "{field}: [{}] -> [{}]", old.join(" "), new.join(" "))
            }
        }
    }
}

struct SourceSection {
    name: String,
    files: Vec<(String, String)>,
    extras: Vec<(String, String)>,
}

impl SourceSection {
    fn diff(&self, new: &SourceSection, out: &mut Vec<FieldChange>) {
        let old_files: HashMap<&str, &str> = self
            .files
            .iter()
            .map(|(p, h)| (p.as_str(), h.as_str()))
            .collect();
        let new_files: HashMap<&str, &str> = new
            .files
            .iter()
            .map(|(p, h)| (p.as_str(), h.as_str()))
            .collect();
        for (p, _) in &self.files {
            if !new_files.contains_key(p.as_str()) {
                out.push(FieldChange::FileRemoved {
                    source: self.name.clone(),
                    file: p.clone(),
                });
            }
        }
        for (p, h) in &new.files {
            match old_files.get(p.as_str()) {
                None => out.push(FieldChange::FileAdded {
                    source: self.name.clone(),
                    file: p.clone(),
                }),
                Some(o) if o != h => out.push(FieldChange::FileChanged {
                    source: self.name.clone(),
                    file: p.clone(),
                    old: o.to_string(),
                    new: h.clone(),
                }),
                Some(_) => {}
            }
        }
        let order = |s: &SourceSection| s.files.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        if old_files.len() == new_files.len()
            && old_files.keys().all(|k| new_files.contains_key(k))
            && order(self) != order(new)
        {
            out.push(FieldChange::Reordered {
                what: format!("files of {}", self.name),
            });
        }
        for e in &self.extras {
            if !new.extras.contains(e) {
                out.push(FieldChange::Removed {
                    field: e.0.clone(),
                    value: e.1.clone(),
                });
            }
        }
        for e in &new.extras {
            if !self.extras.contains(e) {
                out.push(FieldChange::Added {
                    field: e.0.clone(),
                    value: e.1.clone(),
                });
            }
        }
    }
}

struct Sections {
    scalars: Vec<(String, String)>,
    sources: Vec<SourceSection>,
    lists: BTreeMap<String, Vec<String>>,
}

impl Sections {
    fn of(p: &Payload) -> Self {
        let mut s = Sections {
            scalars: Vec::new(),
            sources: Vec::new(),
            lists: BTreeMap::new(),
        };
        for (f, v) in &p.entries {
            match f.as_str() {
                "source" => s.sources.push(SourceSection {
                    name: v.clone(),
                    files: Vec::new(),
                    extras: Vec::new(),
                }),
                "file" if !s.sources.is_empty() => {
                    let (hash, path) = v.split_once(' ').unwrap_or((v, ""));
                    let last = s.sources.last_mut().expect("checked non-empty");
                    last.files.push((path.to_string(), hash.to_string()));
                }
                "missing_include" | "computed_include" if !s.sources.is_empty() => {
                    let last = s.sources.last_mut().expect("checked non-empty");
                    last.extras.push((f.clone(), v.clone()));
                }
                f if LIST_FIELDS.contains(&f) => {
                    s.lists.entry(f.to_string()).or_default().push(v.clone())
                }
                _ => s.scalars.push((f.clone(), v.clone())),
            }
        }
        s
    }
    fn scalar(&self, f: &str) -> Option<&str> {
        self.scalars
            .iter()
            .find(|(k, _)| k == f)
            .map(|(_, v)| v.as_str())
    }
    fn list(&self, f: &str) -> Vec<String> {
        self.lists.get(f).cloned().unwrap_or_default()
    }
}

/// Why an extension is, or is not, keyed on the Python ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PythonAbiReason {
    /// `is_python_module = true` (a pybind11 module) always depends on it.
    PythonModule,
    /// `python_abi_dependent` was set explicitly.
    Explicit,
    /// The scan found Python-ABI markers (see `ScanReport::python_markers`).
    Detected,
    /// The scan found no marker.
    NotDetected,
}

/// A computed key with everything decided on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Keyed {
    /// Extension name.
    pub name: String,
    /// 32 lower-case hex digits (see [`Payload::key`]).
    pub key: String,
    /// The payload the key is the hash of.
    pub payload: Payload,
    /// `agnostic`, or the SOABI (or its fallback) the binary is tied to.
    pub python_abi: String,
    /// `stable-M.m`, or the torch version the binary is keyed on.
    pub torch_abi: String,
    /// Whether the binary is tied to the Python ABI.
    pub python_abi_dependent: bool,
    /// Why [`python_abi_dependent`](Self::python_abi_dependent) has its value.
    pub python_abi_reason: PythonAbiReason,
    /// Host compiler flags to build with: `extra_cflags` plus the stable define.
    pub host_flags: Vec<String>,
    /// nvcc flags to build with: `extra_cuda_cflags` (scheduling flags
    /// included) plus the stable define.
    pub cuda_flags: Vec<String>,
    /// nvcc `-gencode` flags (CUDA only; empty when the user's own nvcc
    /// flags choose architectures, as torch does).
    pub gencode: Vec<String>,
}

/// Computes the payload and key of one extension for one environment.
///
/// Checks run in this order: under a stable target the runtime floor
/// (before anything else, so a too-old torch never reaches a cache lookup),
/// then the stable header rule; then the spec's names and sources; then the
/// torch version, CUDA arch list and nvcc version where the key needs them.
/// `root` is the fingerprint root for display paths of include paths (the
/// scan's paths are already relative to it).
pub fn compute_key(
    spec: &ExtensionSpec,
    env: &Environment,
    scan: &ScanReport,
    root: &Path,
) -> Result<Keyed, KeyError> {
    if let Some(target) = spec.torch_stable_abi_target {
        target.check_runtime_floor(&env.torch_version)?;
        target.validate_headers(scan)?;
    }
    spec.validate()?;
    let cuda = spec.requires_cuda();

    let (python_abi_dependent, python_abi_reason) = if spec.is_python_module {
        (true, PythonAbiReason::PythonModule)
    } else if let Some(explicit) = spec.python_abi_dependent {
        (explicit, PythonAbiReason::Explicit)
    } else if scan.python_abi_dependent() {
        (true, PythonAbiReason::Detected)
    } else {
        (false, PythonAbiReason::NotDetected)
    };
    let python_abi = if python_abi_dependent {
        python_abi_tag(env)?
    } else {
        "agnostic".to_string()
    };

    let (torch_field, torch_abi) = match spec.torch_stable_abi_target {
        Some(t) => ("torch_abi", format!("stable-{t}")),
        None if cuda => ("torch", env.torch_version.clone()),
        None => (
            "torch",
            TorchVersion::parse(&env.torch_version)?.cpu_cache_version(),
        ),
    };

    let mut host_flags = spec.extra_cflags.clone();
    let mut cuda_flags = spec.extra_cuda_cflags.clone();
    if let Some(t) = spec.torch_stable_abi_target {
        t.inject(&mut host_flags)?;
        t.inject(&mut cuda_flags)?;
    }

    let mut gencode = Vec::new();
    let mut nvcc = None;
    if cuda {
        if !arch::user_sets_arch(&cuda_flags) {
            let list = spec
                .cuda_archs
                .as_deref()
                .or(env.cuda_archs.as_deref())
                .filter(|l| !l.trim().is_empty())
                .ok_or_else(|| KeyError::NoCudaArchs {
                    name: spec.name.clone(),
                })?;
            gencode = arch::gencode_flags(list)?;
        }
        let version = env
            .nvcc_version
            .as_deref()
            .ok_or_else(|| KeyError::MissingNvcc {
                name: spec.name.clone(),
            })?;
        nvcc = Some(nvcc_major_minor(version)?);
    }

    let mut p = Payload::new();
    p.push("format", KEY_FORMAT.to_string());
    p.push("name", &spec.name);
    p.push("namespace", spec.namespace());
    p.push("required_ops", spec.required_ops.join(","));
    p.push("python_abi", &python_abi);
    p.push(torch_field, &torch_abi);
    if cuda {
        p.push("torch_cuda", env.torch_cuda.as_deref().unwrap_or("none"));
    }
    p.push("cxx11_abi", if env.cxx11_abi { "1" } else { "0" });
    if let Some(nvcc) = &nvcc {
        p.push("cuda_archs", gencode.join(" "));
        p.push("nvcc", nvcc);
    }
    for src in &scan.sources {
        p.push("source", &src.source);
        for f in &src.files {
            p.push("file", format!("{} {}", f.blake3, f.path));
        }
        for m in &src.missing_includes {
            p.push("missing_include", m);
        }
        for c in &src.computed_includes {
            p.push(
                "computed_include",
                format!("{}:{}:{}", c.file, c.line, c.text),
            );
        }
    }
    for f in &host_flags {
        p.push("cflag", f);
    }
    if cuda {
        for f in key_cuda_flags(&cuda_flags) {
            p.push("cuda_cflag", f);
        }
    }
    for inc in &spec.extra_include_paths {
        p.push("include_path", display_path(inc, root));
    }
    for f in &spec.extra_ldflags {
        p.push("ldflag", f);
    }

    Ok(Keyed {
        name: spec.name.clone(),
        key: p.key(),
        payload: p,
        python_abi,
        torch_abi,
        python_abi_dependent,
        python_abi_reason,
        host_flags,
        cuda_flags,
        gencode,
    })
}

/// The SOABI, else `cpython-<maj>.<min><abiflags>` (abiflags absent → empty).
fn python_abi_tag(env: &Environment) -> Result<String, KeyError> {
    if let Some(soabi) = env.python_soabi.as_deref().filter(|s| !s.is_empty()) {
        return Ok(soabi.to_string());
    }
    let bad = || KeyError::InvalidPythonVersion {
        version: env.python_version.clone(),
    };
    let mut parts = env.python_version.trim().split('.');
    let num = |s: Option<&str>| -> Option<u64> {
        let s = s?;
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    let major = num(parts.next()).ok_or_else(bad)?;
    let minor = num(parts.next()).ok_or_else(bad)?;
    Ok(format!(
        "cpython-{major}.{minor}{}",
        env.python_abiflags.as_deref().unwrap_or("")
    ))
}

/// `12.8.93` / `V12.8.93` / `12.8` → `12.8`.
fn nvcc_major_minor(version: &str) -> Result<String, KeyError> {
    let v = version.trim().trim_start_matches(['V', 'v']);
    let mut parts = v.split('.');
    fn digits(s: Option<&str>) -> Option<&str> {
        s.filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    }
    match (digits(parts.next()), digits(parts.next())) {
        (Some(major), Some(minor)) => Ok(format!("{major}.{minor}")),
        _ => Err(KeyError::InvalidNvccVersion {
            version: version.to_string(),
        }),
    }
}

/// The nvcc flags that enter the key: all but the scheduling flags that
/// cannot change code (`--threads N`, `-t N`, `-tN`, `--split-compile N`,
/// `-split-compile N`, `--split-compile-extended N`, and `=` forms).
pub fn key_cuda_flags(flags: &[String]) -> Vec<&String> {
    const WITH_VALUE: &[&str] = &[
        "--threads",
        "-threads",
        "-t",
        "--split-compile",
        "-split-compile",
        "--split-compile-extended",
        "-split-compile-extended",
    ];
    let mut out = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let f = flags[i].as_str();
        if WITH_VALUE.contains(&f) {
            i += 2; // the flag and its value
            continue;
        }
        let joined = WITH_VALUE
            .iter()
            .any(|o| f.strip_prefix(o).is_some_and(|r| r.starts_with('=')))
            || f.strip_prefix("-t")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()));
        if !joined {
            out.push(&flags[i]);
        }
        i += 1;
    }
    out
}

/// A path as it appears in a payload: relative to `root` with `/`
/// separators when under it (compared both lexically and canonically), else
/// absolute (canonical when it exists). A relative `path` is taken
/// relative to `root`.
pub fn display_path(path: &Path, root: &Path) -> String {
    let lexical_root = normalize(&std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()));
    let lexical = normalize(&lexical_root.join(path));
    let canon = fs_err::canonicalize(&lexical).ok();
    let canon_root = fs_err::canonicalize(&lexical_root).ok();
    let candidates = [
        (canon.as_ref(), canon_root.as_ref()),
        (Some(&lexical), Some(&lexical_root)),
    ];
    for (p, r) in candidates {
        if let (Some(p), Some(r)) = (p, r) {
            if let Ok(rel) = p.strip_prefix(r) {
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                return if parts.is_empty() {
                    ".".to_string()
                } else {
                    parts.join("/")
                };
            }
        }
    }
    canon.unwrap_or(lexical).to_string_lossy().into_owned()
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn escape(v: &str) -> String {
    if !v.contains(['\\', '\n', '\r']) {
        return v.to_string();
    }
    v.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn scheduling_flags_are_left_out_of_the_key() {
        let flags = s(&[
            "-O3",
            "--threads",
            "8",
            "--threads=4",
            "-t",
            "2",
            "-t16",
            "--split-compile",
            "0",
            "--split-compile=4",
            "-split-compile",
            "3",
            "--split-compile-extended=2",
            "--use_fast_math",
        ]);
        assert_eq!(key_cuda_flags(&flags), ["-O3", "--use_fast_math"]);
        assert_eq!(
            key_cuda_flags(&s(&["-O3", "-tx"])),
            ["-O3", "-tx"],
            "-t needs digits to be joined"
        );
    }

    #[test]
    fn escaping_keeps_one_field_per_line_and_is_injective() {
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(escape("a\\nb"), "a\\\\nb");
        assert_ne!(escape("a\nb"), escape("a\\nb"));
        assert_eq!(escape("-DX=1"), "-DX=1");
    }

    #[test]
    fn nvcc_versions() {
        assert_eq!(nvcc_major_minor("12.8").unwrap(), "12.8");
        assert_eq!(nvcc_major_minor("12.8.93").unwrap(), "12.8");
        assert_eq!(nvcc_major_minor("V13.0.48").unwrap(), "13.0");
        assert!(nvcc_major_minor("12").is_err());
        assert!(nvcc_major_minor("twelve").is_err());
    }

    #[test]
    fn display_paths() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("inc/sub")).unwrap();
        assert_eq!(display_path(&d.path().join("inc/sub"), d.path()), "inc/sub");
        assert_eq!(display_path(Path::new("inc/./sub/.."), d.path()), "inc");
        assert_eq!(display_path(d.path(), d.path()), ".");
        let outside = display_path(Path::new("/usr/include"), d.path());
        assert!(outside.starts_with('/'), "{outside}");
    }

    #[test]
    fn payload_roundtrips_through_text() {
        let mut p = Payload::new();
        p.push("format", "1");
        p.push("cflag", "-DA=\"x\ny\"");
        let q = Payload::parse(&p.text()).unwrap();
        assert_eq!(p, q);
        assert_eq!(p.key(), q.key());
        assert!(Payload::parse("format=1\nnonsense\n").is_err());
    }
}
