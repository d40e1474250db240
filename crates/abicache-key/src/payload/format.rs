//! The payload's text format (README: "How the key is made", step 4): its lines, escaping, display
//! paths, the key of a payload, and typed accessors for the fields other
//! code reads, so no caller picks lines by field name.
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
//! host_cpu=<resolved target options>       only with -march/-mcpu/-mtune=native
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

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::KeyError;

/// Version of the payload format; the first line of every payload.
pub const KEY_FORMAT: u32 = 1;

/// Number of hex digits in a key (128 bits).
pub const KEY_HEX_LEN: usize = 32;

/// The bytes of payload text [`Payload::key`] hashes at a time.
const KEY_BLOCK: usize = 64 * 1024;

/// The ordered `field=value` lines a key is the hash of.
///
/// Serializes as the list of its [`lines`](Self::lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// `(field, escaped value)`: a field is a name from the code (borrowed)
    /// unless parsed back from text.
    entries: Vec<(Cow<'static, str>, String)>,
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.lines())
    }
}

impl Payload {
    /// An empty payload with room for `lines` lines.
    pub(crate) fn with_capacity(lines: usize) -> Self {
        Self {
            entries: Vec::with_capacity(lines),
        }
    }

    pub(crate) fn push(&mut self, field: &'static str, value: impl AsRef<str>) {
        self.entries
            .push((Cow::Borrowed(field), escape(value.as_ref())));
    }

    /// [`Payload::push`] of a value built for it: kept as is (no copy)
    /// unless it needs escaping.
    pub(crate) fn push_owned(&mut self, field: &'static str, value: String) {
        let escaped = match needs_escape(&value) {
            false => value,
            true => escape(&value),
        };
        self.entries.push((Cow::Borrowed(field), escaped));
    }

    /// Reads a stored payload text back (e.g. to [`diff`](Self::diff) it);
    /// a line without `=` is [`KeyError::InvalidPayload`].
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let entries = text
            .lines()
            .enumerate()
            .map(|(i, line)| {
                line.split_once('=')
                    .map(|(f, v)| (Cow::Owned(f.to_string()), v.to_string()))
                    .ok_or_else(|| KeyError::InvalidPayload {
                        line: i + 1,
                        text: line.to_string(),
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// The `(field, escaped value)` pairs, in payload order.
    pub fn entries(&self) -> &[(Cow<'static, str>, String)] {
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
        let mut s = String::with_capacity(self.text_len());
        self.write_text(&mut s);
        s
    }

    /// The length of [`text`](Self::text) in bytes.
    pub fn text_len(&self) -> usize {
        self.entries
            .iter()
            .map(|(f, v)| f.len() + v.len() + 2)
            .sum()
    }

    /// Appends [`text`](Self::text) to `out` (which the caller may have
    /// sized with [`text_len`](Self::text_len)).
    pub fn write_text(&self, out: &mut String) {
        for (f, v) in &self.entries {
            out.push_str(f);
            out.push('=');
            out.push_str(v);
            out.push('\n');
        }
    }

    /// 32 lower-case hex digits: the first 128 bits of BLAKE3 of [`text`](Self::text).
    /// The text is hashed as it is written, a block at a time, never whole
    /// in memory (a payload of thousands of files is a megabyte).
    pub fn key(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        let mut block = String::with_capacity(KEY_BLOCK);
        for (f, v) in &self.entries {
            if block.len() + f.len() + v.len() + 2 > KEY_BLOCK {
                hasher.update(block.as_bytes());
                block.clear();
            }
            block.push_str(f);
            block.push('=');
            block.push_str(v);
            block.push('\n');
        }
        hasher.update(block.as_bytes());
        hasher.finalize().to_hex()[..KEY_HEX_LEN].to_string()
    }

    /// The `python_abi` field: `agnostic`, or the SOABI the binary is tied to.
    pub fn python_abi(&self) -> Option<&str> {
        self.get("python_abi")
    }

    /// The torch ABI: `stable-M.m` (the `torch_abi` field) or the keyed torch
    /// version (the `torch` field).
    pub fn torch_abi(&self) -> Option<&str> {
        self.get("torch_abi").or_else(|| self.get("torch"))
    }

    /// The lines that describe the ABI a binary is compiled for (`python_abi`,
    /// `torch` or `torch_abi`, `torch_cuda`, `cxx11_abi`, `cuda_archs`,
    /// `nvcc`, `host_cpu`: those present, in payload order), as payload text: mixed into
    /// every compiled object's key, so objects never cross ABIs.
    pub fn abi_fields(&self) -> String {
        let entries = self
            .entries
            .iter()
            .filter(|(field, _)| ABI_FIELDS.contains(&field.as_ref()))
            .cloned()
            .collect();
        Payload { entries }.text()
    }
}

/// The fields that describe the ABI a binary is compiled for (what the
/// environment contributes): Python and torch ABI, torch's CUDA, the C++
/// ABI, for CUDA the archs and the nvcc release, and the CPU `-march=native`
/// resolved to.
const ABI_FIELDS: &[&str] = &[
    "python_abi",
    "torch_abi",
    "torch",
    "torch_cuda",
    "cxx11_abi",
    "cuda_archs",
    "nvcc",
    "host_cpu",
];

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

/// Whether `v` holds a byte [`escape`] rewrites.
fn needs_escape(v: &str) -> bool {
    memchr::memchr3(b'\\', b'\n', b'\r', v.as_bytes()).is_some()
}

fn escape(v: &str) -> String {
    if !needs_escape(v) {
        return v.to_string();
    }
    v.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_one_field_per_line_and_is_injective() {
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(escape("a\\nb"), "a\\\\nb");
        assert_ne!(escape("a\nb"), escape("a\\nb"));
        assert_eq!(escape("-DX=1"), "-DX=1");
    }

    #[test]
    fn a_value_pushed_owned_is_escaped_like_any_other() {
        let mut p = Payload::with_capacity(4);
        p.push_owned("file", "abc inc/odd\nname\\.h".to_owned());
        p.push_owned("file", "abc inc/plain.h".to_owned());
        p.push("file", "abc inc/odd\nname\\.h");
        assert_eq!(
            p.text(),
            "file=abc inc/odd\\nname\\\\.h\nfile=abc inc/plain.h\nfile=abc inc/odd\\nname\\\\.h\n"
        );
        assert_eq!(p.text().lines().count(), 3, "one field per line");
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
        let mut p = Payload::with_capacity(4);
        p.push("format", "1");
        p.push("cflag", "-DA=\"x\ny\"");
        let q = Payload::parse(&p.text()).unwrap();
        assert_eq!(p, q);
        assert_eq!(p.key(), q.key());
        assert!(Payload::parse("format=1\nnonsense\n").is_err());
    }
}
