//! What to build: the extension spec (docs/cli.md, "The spec file") and the `abicache.toml` file.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::stable::StableTarget;
use crate::KeyError;

/// Source file extensions compiled by the host compiler.
pub const HOST_SOURCE_EXTENSIONS: &[&str] = &["cpp", "cc", "cxx", "c"];
/// Source file extensions compiled by nvcc.
pub const CUDA_SOURCE_EXTENSIONS: &[&str] = &["cu"];
const HEADER_EXTENSIONS: &[&str] = &["h", "hh", "hpp", "hxx", "cuh", "inl", "inc", "ipp", "tcc"];

/// One extension to build, as in `torch.utils.cpp_extension.load` (docs/cli.md, "The spec file").
///
/// Built from an `[[extension]]` table by [`SpecFile::load`] (paths already
/// resolved against the TOML file's directory) or programmatically with
/// [`ExtensionSpec::new`] and the `with_*` setters; [`validate`](Self::validate)
/// checks names and sources either way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionSpec {
    /// Library name, `[A-Za-z_][A-Za-z0-9_]*`.
    pub name: String,
    /// `torch.ops` namespace it registers; `None` means [`name`](Self::name).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Ops that must exist after loading.
    #[serde(default)]
    pub required_ops: Vec<String>,
    /// Translation units: `.cpp/.cc/.cxx/.c` (host compiler) and `.cu` (nvcc).
    pub sources: Vec<PathBuf>,
    /// Extra host compiler flags.
    #[serde(default)]
    pub extra_cflags: Vec<String>,
    /// Extra nvcc flags.
    #[serde(default)]
    pub extra_cuda_cflags: Vec<String>,
    /// Extra linker flags.
    #[serde(default)]
    pub extra_ldflags: Vec<String>,
    /// `-I` roots, also used to resolve local includes.
    #[serde(default)]
    pub extra_include_paths: Vec<PathBuf>,
    /// CUDA extension; `None` means "any source is `.cu`".
    #[serde(default)]
    pub requires_cuda: Option<bool>,
    /// A pybind11 module imported with importlib (always Python-ABI dependent).
    #[serde(default)]
    pub is_python_module: bool,
    /// Explicit Python-ABI override; `None` (TOML `"auto"`) means detection.
    #[serde(default, deserialize_with = "bool_or_auto")]
    pub python_abi_dependent: Option<bool>,
    /// Explicit libtorch stable-ABI floor (TOML `"2.10"` or `[2, 10]`).
    #[serde(default)]
    pub torch_stable_abi_target: Option<StableTarget>,
    /// Arch list like `TORCH_CUDA_ARCH_LIST`; wins over the environment's.
    #[serde(default)]
    pub cuda_archs: Option<String>,
    /// Which loader the library is for (docs/tvm-ffi.md): a torch extension
    /// (the default) or a TVM-FFI module. Left out of the serialized spec
    /// when it is the default, so torch specs serialize as before.
    #[serde(default, skip_serializing_if = "ExtensionKind::is_torch")]
    pub kind: ExtensionKind,
}

/// The loader an extension's library is built for, which decides what it
/// links against and which key fields it carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtensionKind {
    /// A PyTorch extension (`torch.ops` library or pybind11 module): built
    /// against torch's headers and libraries, keyed by the torch release (or
    /// its stable-ABI target).
    #[default]
    Torch,
    /// An Apache TVM-FFI module (`tvm_ffi.load_module`): built against
    /// TVM-FFI's headers and `libtvm_ffi`, keyed by the TVM-FFI C ABI
    /// (`tvm_ffi_abi`); torch only when a source includes a torch header.
    TvmFfi,
}

impl ExtensionKind {
    /// True for [`ExtensionKind::Torch`], the default.
    pub fn is_torch(&self) -> bool {
        matches!(self, ExtensionKind::Torch)
    }
}

impl ExtensionSpec {
    /// A spec with a name and sources and every other field at its default.
    pub fn new(
        name: impl Into<String>,
        sources: impl IntoIterator<Item = impl Into<PathBuf>>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: None,
            required_ops: Vec::new(),
            sources: sources.into_iter().map(Into::into).collect(),
            extra_cflags: Vec::new(),
            extra_cuda_cflags: Vec::new(),
            extra_ldflags: Vec::new(),
            extra_include_paths: Vec::new(),
            requires_cuda: None,
            is_python_module: false,
            python_abi_dependent: None,
            torch_stable_abi_target: None,
            cuda_archs: None,
            kind: ExtensionKind::Torch,
        }
    }

    /// Sets the loader the library is built for.
    pub fn with_kind(mut self, kind: ExtensionKind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the `torch.ops` namespace.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
    /// Sets the ops that must exist after loading.
    pub fn with_required_ops(mut self, ops: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.required_ops = ops.into_iter().map(Into::into).collect();
        self
    }
    /// Sets the extra host compiler flags.
    pub fn with_extra_cflags(mut self, flags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_cflags = flags.into_iter().map(Into::into).collect();
        self
    }
    /// Sets the extra nvcc flags.
    pub fn with_extra_cuda_cflags(
        mut self,
        flags: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.extra_cuda_cflags = flags.into_iter().map(Into::into).collect();
        self
    }
    /// Sets the extra linker flags.
    pub fn with_extra_ldflags(
        mut self,
        flags: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.extra_ldflags = flags.into_iter().map(Into::into).collect();
        self
    }
    /// Sets the extra include paths.
    pub fn with_extra_include_paths(
        mut self,
        paths: impl IntoIterator<Item = impl Into<PathBuf>>,
    ) -> Self {
        self.extra_include_paths = paths.into_iter().map(Into::into).collect();
        self
    }
    /// Overrides CUDA detection (`None`: any `.cu` source).
    pub fn with_requires_cuda(mut self, requires_cuda: Option<bool>) -> Self {
        self.requires_cuda = requires_cuda;
        self
    }
    /// Marks a pybind11 module (forces Python-ABI dependence).
    pub fn with_is_python_module(mut self, is_python_module: bool) -> Self {
        self.is_python_module = is_python_module;
        self
    }
    /// Overrides Python-ABI detection (`None`: auto).
    pub fn with_python_abi_dependent(mut self, dependent: Option<bool>) -> Self {
        self.python_abi_dependent = dependent;
        self
    }
    /// Sets the explicit libtorch stable-ABI floor.
    pub fn with_torch_stable_abi_target(mut self, target: Option<StableTarget>) -> Self {
        self.torch_stable_abi_target = target;
        self
    }
    /// Sets the CUDA arch list.
    pub fn with_cuda_archs(mut self, archs: Option<String>) -> Self {
        self.cuda_archs = archs;
        self
    }

    /// The `torch.ops` namespace: the explicit one, else the name.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(&self.name)
    }

    /// True for a CUDA extension: the explicit value, else "any `.cu` source".
    pub fn requires_cuda(&self) -> bool {
        self.requires_cuda.unwrap_or_else(|| {
            self.sources
                .iter()
                .any(|s| CUDA_SOURCE_EXTENSIONS.contains(&extension_of(s).as_str()))
        })
    }

    /// The fingerprint root a caller that names none uses (the Python
    /// package's rule; the command line uses the spec file's directory):
    /// the deepest directory holding every source's directory and every
    /// include path, compared component by component; `None` when there
    /// are no paths (the caller then uses its current directory). Files are
    /// named relative to it in the payload, so moving the project keeps the key.
    pub fn default_fingerprint_root(&self) -> Option<PathBuf> {
        let mut dirs = self
            .sources
            .iter()
            .filter_map(|s| s.parent())
            .chain(self.extra_include_paths.iter().map(PathBuf::as_path));
        let first: Vec<_> = dirs.next()?.components().collect();
        let common = dirs.fold(first, |common, dir| {
            common
                .into_iter()
                .zip(dir.components())
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect()
        });
        Some(common.into_iter().collect())
    }

    /// Checks the name and namespace (C identifiers) and the sources (at
    /// least one, each with a compilable extension; headers are rejected).
    pub fn validate(&self) -> Result<(), KeyError> {
        check_identifier("name", &self.name)?;
        if let Some(ns) = &self.namespace {
            check_identifier("namespace", ns)?;
        }
        if self.sources.is_empty() {
            return Err(KeyError::NoSources {
                name: self.name.clone(),
            });
        }
        for s in &self.sources {
            let ext = extension_of(s);
            if HOST_SOURCE_EXTENSIONS.contains(&ext.as_str())
                || CUDA_SOURCE_EXTENSIONS.contains(&ext.as_str())
            {
                continue;
            }
            return Err(
                if HEADER_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()) {
                    KeyError::HeaderAsSource {
                        name: self.name.clone(),
                        path: s.clone(),
                    }
                } else {
                    KeyError::UnknownSourceExtension {
                        name: self.name.clone(),
                        path: s.clone(),
                    }
                },
            );
        }
        Ok(())
    }

    fn resolve_paths(&mut self, dir: &Path) {
        for p in self
            .sources
            .iter_mut()
            .chain(self.extra_include_paths.iter_mut())
        {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
    }
}

fn extension_of(p: &Path) -> String {
    p.extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Rejects anything but `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn check_identifier(field: &'static str, value: &str) -> Result<(), KeyError> {
    let mut bytes = value.bytes();
    let ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(KeyError::InvalidName {
            field,
            value: value.escape_debug().to_string(),
        })
    }
}

fn bool_or_auto<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Option<bool>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("true, false or \"auto\"")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<bool>, E> {
            Ok(Some(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<bool>, E> {
            match v {
                "auto" => Ok(None),
                _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
            }
        }
    }
    d.deserialize_any(V)
}

/// A parsed `abicache.toml`: one or more `[[extension]]` tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecFile {
    /// The TOML file as given.
    pub path: PathBuf,
    /// Its directory (absolute): relative paths were resolved against it, and
    /// it is the fingerprint root.
    pub root: PathBuf,
    /// The extensions, in file order, each validated, names unique.
    pub extensions: Vec<ExtensionSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    extension: Vec<ExtensionSpec>,
}

impl SpecFile {
    /// Reads and validates a spec file.
    ///
    /// Unknown fields, wrong types and TOML syntax errors are
    /// [`KeyError::SpecParse`] naming the file, the line and the field.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let text = read_toml_file(path)?;
        Self::parse(&text, path)
    }

    /// Parses spec text as if read from `path` (used for its directory and in messages).
    pub fn parse(text: &str, path: &Path) -> Result<Self, KeyError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| KeyError::SpecParse {
            path: path.to_path_buf(),
            message: toml_message(text, &e),
        })?;
        let root = base_dir(path)?;
        if raw.extension.is_empty() {
            return Err(KeyError::NoExtensions {
                path: path.to_path_buf(),
            });
        }
        let mut extensions: Vec<ExtensionSpec> = Vec::with_capacity(raw.extension.len());
        for mut ext in raw.extension {
            ext.resolve_paths(&root);
            ext.validate().map_err(|e| KeyError::InSpecFile {
                path: path.to_path_buf(),
                inner: Box::new(e),
            })?;
            if extensions.iter().any(|e| e.name == ext.name) {
                return Err(KeyError::DuplicateExtension {
                    path: path.to_path_buf(),
                    name: ext.name,
                });
            }
            extensions.push(ext);
        }
        Ok(Self {
            path: path.to_path_buf(),
            root,
            extensions,
        })
    }

    /// Picks an extension: by name, or the only one when `name` is `None`.
    pub fn extension(&self, name: Option<&str>) -> Result<&ExtensionSpec, KeyError> {
        let available = || {
            self.extensions
                .iter()
                .map(|e| format!("`{}`", e.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match name {
            Some(n) => self.extensions.iter().find(|e| e.name == n).ok_or_else(|| {
                KeyError::ExtensionNotFound {
                    requested: n.to_string(),
                    available: available(),
                }
            }),
            None if self.extensions.len() == 1 => Ok(&self.extensions[0]),
            None => Err(KeyError::AmbiguousExtension {
                available: available(),
            }),
        }
    }
}

/// The absolute directory of a file given by path.
/// The largest spec or environment file read.
pub(crate) const MAX_TOML_SIZE: u64 = 16 << 20;

/// Reads a spec or environment file: a regular file (a FIFO, device or
/// directory is refused at once instead of blocking or reading forever) of
/// at most [`MAX_TOML_SIZE`] bytes of UTF-8. Errors name the path.
pub(crate) fn read_toml_file(path: &Path) -> Result<String, KeyError> {
    let bytes = abicache_fs::read_bounded(path, abicache_fs::Follow::Yes, MAX_TOML_SIZE)
        .map_err(std::io::Error::from)?;
    String::from_utf8(bytes).map_err(|_| {
        KeyError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("`{}` is not UTF-8 text", path.display()),
        ))
    })
}

pub(crate) fn base_dir(path: &Path) -> Result<PathBuf, KeyError> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(std::path::absolute(parent).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot make `{}` absolute: {e}", parent.display()),
        )
    })?)
}

/// A one-line TOML error: `line N: message`.
pub(crate) fn toml_message(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_fingerprint_root_is_the_common_directory() {
        let root = |sources: &[&str], includes: &[&str]| {
            ExtensionSpec::new("x", sources.iter().map(PathBuf::from))
                .with_extra_include_paths(includes.iter().map(PathBuf::from))
                .default_fingerprint_root()
        };
        let some = |p: &str| Some(PathBuf::from(p));
        assert_eq!(root(&["/p/a.cpp"], &[]), some("/p"));
        assert_eq!(
            root(&["/p/src/a.cpp", "/p/b.cu"], &["/p/include"]),
            some("/p")
        );
        assert_eq!(root(&["/p/src/a.cpp"], &["/p/src/"]), some("/p/src"));
        assert_eq!(root(&["/p/ab/a.cpp", "/p/abc/b.cpp"], &[]), some("/p"));
        assert_eq!(root(&["/a/x.cpp", "/b/y.cpp"], &[]), some("/"));
        assert_eq!(root(&[], &[]), None);
    }

    #[test]
    fn identifiers() {
        for ok in ["a", "_x", "gemm_v2", "A9"] {
            check_identifier("name", ok).unwrap();
        }
        for bad in ["", "9a", "a-b", "a.b", "a b", "ä", "a\nb"] {
            assert!(check_identifier("name", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn requires_cuda_defaults_to_any_cu_source() {
        assert!(!ExtensionSpec::new("x", ["a.cpp"]).requires_cuda());
        assert!(ExtensionSpec::new("x", ["a.cpp", "b.cu"]).requires_cuda());
        assert!(ExtensionSpec::new("x", ["a.cpp"])
            .with_requires_cuda(Some(true))
            .requires_cuda());
        assert!(!ExtensionSpec::new("x", ["b.cu"])
            .with_requires_cuda(Some(false))
            .requires_cuda());
    }

    #[test]
    fn validate_sources() {
        ExtensionSpec::new("x", ["a.cpp", "b.cc", "c.cxx", "d.c", "e.cu"])
            .validate()
            .unwrap();
        assert!(matches!(
            ExtensionSpec::new("x", ["k.cuh"]).validate(),
            Err(KeyError::HeaderAsSource { .. })
        ));
        assert!(matches!(
            ExtensionSpec::new("x", ["k.h"]).validate(),
            Err(KeyError::HeaderAsSource { .. })
        ));
        assert!(matches!(
            ExtensionSpec::new("x", ["k.rs"]).validate(),
            Err(KeyError::UnknownSourceExtension { .. })
        ));
        assert!(matches!(
            ExtensionSpec::new("x", ["Makefile"]).validate(),
            Err(KeyError::UnknownSourceExtension { .. })
        ));
        assert!(matches!(
            ExtensionSpec::new("x", Vec::<PathBuf>::new()).validate(),
            Err(KeyError::NoSources { .. })
        ));
        assert!(matches!(
            ExtensionSpec::new("x", ["a.cpp"])
                .with_namespace("my-ns")
                .validate(),
            Err(KeyError::InvalidName {
                field: "namespace",
                ..
            })
        ));
    }

    #[test]
    fn namespace_defaults_to_name() {
        assert_eq!(ExtensionSpec::new("x", ["a.cpp"]).namespace(), "x");
        assert_eq!(
            ExtensionSpec::new("x", ["a.cpp"])
                .with_namespace("y")
                .namespace(),
            "y"
        );
    }
}
