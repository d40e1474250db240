//! The payload's text format (docs/key.md, step 4): its lines, escaping, display
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

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::KeyError;

/// Version of the payload format; the first line of every payload.
pub const KEY_FORMAT: u32 = 1;

/// Number of hex digits in a key (128 bits).
pub const KEY_HEX_LEN: usize = 32;

/// The ordered `field=value` lines a key is the hash of.
///
/// Kept as the very text that is hashed (each line `field=value\n`, values
/// escaped), with where each line's `=` and end are: a payload of thousands
/// of files is one buffer rather than a string per line, its key one hash
/// of that buffer, and its text a copy of it.
///
/// Serializes as the list of its [`lines`](Self::lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// Every line, `field=value\n`.
    text: String,
    /// Per line, the offsets in `text` of its `=` and of its `\n`.
    lines: Vec<(usize, usize)>,
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.lines())
    }
}

impl Payload {
    /// An empty payload with room for `lines` lines of `bytes` bytes in all.
    pub(crate) fn with_capacity(lines: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            lines: Vec::with_capacity(lines),
        }
    }

    /// Appends the line `field=value` (`value` escaped).
    pub(crate) fn push(&mut self, field: &'static str, value: impl AsRef<str>) {
        self.push_joined(field, &[value.as_ref()]);
    }

    /// Appends the line whose value is `parts` one after the other: the
    /// line [`Payload::push`] of their concatenation appends (escaping
    /// rewrites characters one by one), without building it first.
    pub(crate) fn push_joined(&mut self, field: &'static str, parts: &[&str]) {
        let text = &mut self.text;
        text.push_str(field);
        let eq = text.len();
        text.push('=');
        // Written as is, then checked once: a value rarely needs escaping.
        for part in parts {
            text.push_str(part);
        }
        if needs_escape(&text[eq + 1..]) {
            text.truncate(eq + 1);
            for part in parts {
                push_escaped(text, part);
            }
        }
        self.lines.push((eq, text.len()));
        text.push('\n');
    }

    /// Reads a stored payload text back (e.g. to [`diff`](Self::diff) it);
    /// a line without `=` is [`KeyError::InvalidPayload`].
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut p = Payload::with_capacity(0, text.len() + 1);
        for (i, line) in text.lines().enumerate() {
            let eq = line.find('=').ok_or_else(|| KeyError::InvalidPayload {
                line: i + 1,
                text: line.to_string(),
            })?;
            let start = p.text.len();
            p.text.push_str(line);
            p.lines.push((start + eq, p.text.len()));
            p.text.push('\n');
        }
        Ok(p)
    }

    /// The `(field, escaped value)` pairs, in payload order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        (0..self.lines.len()).map(|k| {
            let (eq, end) = self.lines[k];
            let start = self.line_start(k);
            (&self.text[start..eq], &self.text[eq + 1..end])
        })
    }

    /// Where line `k` starts in `text`.
    fn line_start(&self, k: usize) -> usize {
        match k {
            0 => 0,
            _ => self.lines[k - 1].1 + 1,
        }
    }

    /// The value of the first line with this field, if any (escaped).
    pub fn get(&self, field: &str) -> Option<&str> {
        self.entries().find(|(f, _)| *f == field).map(|(_, v)| v)
    }

    /// The lines, `field=value`, without line terminators.
    pub fn lines(&self) -> Vec<String> {
        (0..self.lines.len())
            .map(|k| self.text[self.line_start(k)..self.lines[k].1].to_string())
            .collect()
    }

    /// The exact text that is hashed: lines joined by `\n`, with a trailing `\n`.
    pub fn text(&self) -> String {
        self.text.clone()
    }

    /// The length of [`text`](Self::text) in bytes.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Appends [`text`](Self::text) to `out` (which the caller may have
    /// sized with [`text_len`](Self::text_len)).
    pub fn write_text(&self, out: &mut String) {
        out.push_str(&self.text);
    }

    /// 32 lower-case hex digits: the first 128 bits of BLAKE3 of [`text`](Self::text).
    pub fn key(&self) -> String {
        blake3::hash(self.text.as_bytes()).to_hex()[..KEY_HEX_LEN].to_string()
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
    /// `tvm_ffi_abi`, `torch` or `torch_abi`, `torch_cuda`, `cxx11_abi`, `cuda_archs`,
    /// `nvcc`, `host_cpu`: those present, in payload order), as payload text: mixed into
    /// every compiled object's key, so objects never cross ABIs.
    pub fn abi_fields(&self) -> String {
        let mut out = String::new();
        for k in 0..self.lines.len() {
            let (start, (eq, end)) = (self.line_start(k), self.lines[k]);
            if ABI_FIELDS.contains(&&self.text[start..eq]) {
                out.push_str(&self.text[start..=end]);
            }
        }
        out
    }
}

/// The fields that describe the ABI a binary is compiled for (what the
/// environment contributes): Python, TVM-FFI and torch ABI, torch's CUDA, the C++
/// ABI, for CUDA the archs and the nvcc release, the CPU `-march=native`
/// resolved to, and the extensions the compiler enables by itself.
const ABI_FIELDS: &[&str] = &[
    "python_abi",
    "tvm_ffi_abi",
    "torch_abi",
    "torch",
    "torch_cuda",
    "cxx11_abi",
    "cuda_archs",
    "nvcc",
    "host_cpu",
    "compiler_isa",
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

/// Whether `v` holds a character [`push_escaped`] rewrites.
fn needs_escape(v: &str) -> bool {
    memchr::memchr3(b'\\', b'\n', b'\r', v.as_bytes()).is_some()
}

/// `v` escaped, as a payload holds it.
#[cfg(test)]
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    push_escaped(&mut out, v);
    out
}

/// Appends `v` escaped to `out` (see the module docs: a backslash, a
/// newline and a carriage return are written `\\`, `\n` and `\r`),
/// character by character only when it holds one of them.
fn push_escaped(out: &mut String, v: &str) {
    if !needs_escape(v) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
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
    fn a_value_pushed_in_parts_is_escaped_like_any_other() {
        let mut p = Payload::with_capacity(4, 0);
        p.push_joined("file", &["abc", " ", "inc/odd\nname\\.h"]);
        p.push_joined("file", &["abc", " inc/plain.h"]);
        p.push("file", "abc inc/odd\nname\\.h");
        assert_eq!(
            p.text(),
            "file=abc inc/odd\\nname\\\\.h\nfile=abc inc/plain.h\nfile=abc inc/odd\\nname\\\\.h\n"
        );
        assert_eq!(p.text().lines().count(), 3, "one field per line");
    }

    /// Every accessor reads the one text: lines, entries, fields and the
    /// ABI lines are its lines, and the key is the hash of it.
    #[test]
    fn the_accessors_agree_with_the_text() {
        let mut p = Payload::with_capacity(0, 0);
        p.push("format", "1");
        p.push("python_abi", "agnostic");
        p.push("torch", "2.15.0");
        p.push("source", "src/a=b.cpp");
        p.push_joined("file", &["0123", " ", "src/a=b.cpp"]);
        p.push("cflag", "-DX=\\\n");
        let text = p.text();
        assert_eq!(
            text,
            "format=1\npython_abi=agnostic\ntorch=2.15.0\nsource=src/a=b.cpp\n\
             file=0123 src/a=b.cpp\ncflag=-DX=\\\\\\n\n"
        );
        assert_eq!(p.lines(), text.lines().collect::<Vec<_>>());
        let entries: Vec<String> = p.entries().map(|(f, v)| format!("{f}={v}")).collect();
        assert_eq!(entries, p.lines());
        assert_eq!(p.get("source"), Some("src/a=b.cpp"));
        assert_eq!(p.get("cflag"), Some("-DX=\\\\\\n"));
        assert_eq!(p.get("ldflag"), None);
        assert_eq!(p.abi_fields(), "python_abi=agnostic\ntorch=2.15.0\n");
        assert_eq!(p.text_len(), text.len());
        assert_eq!(
            p.key(),
            blake3::hash(text.as_bytes()).to_hex()[..KEY_HEX_LEN].to_string()
        );
        assert_eq!(Payload::parse(&text).unwrap(), p);
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
        let mut p = Payload::with_capacity(4, 0);
        p.push("format", "1");
        p.push("cflag", "-DA=\"x\ny\"");
        let q = Payload::parse(&p.text()).unwrap();
        assert_eq!(p, q);
        assert_eq!(p.key(), q.key());
        assert!(Payload::parse("format=1\nnonsense\n").is_err());
    }
}
