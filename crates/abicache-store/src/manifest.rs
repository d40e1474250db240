//! The manifest of a cache entry: `manifest.json`, written last, so an entry
//! without it does not exist.

use std::collections::BTreeMap;
use std::path::Path;

use abicache_fs::{read_bounded, Follow};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::layout::MANIFEST_FORMAT;

/// The largest manifest read (payloads of the biggest extensions are ~100 KiB).
pub const MAX_MANIFEST_SIZE: u64 = 64 << 20;

/// What is known about one cached library. `publish` fills in `format`,
/// `library`, `library_blake3` and `size` from the file it publishes; the
/// rest comes from the caller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Manifest format ([`MANIFEST_FORMAT`]).
    pub format: u32,
    /// The cache key (hex BLAKE3 of `payload`).
    pub key: String,
    /// The extension's name.
    pub name: String,
    /// The full key payload, so a miss can be explained field by field.
    pub payload: String,
    /// File name of the library inside the entry directory.
    pub library: String,
    /// Hex BLAKE3 of the library.
    pub library_blake3: String,
    /// Size of the library in bytes.
    pub size: u64,
    /// Free-form toolchain description (compiler versions).
    #[serde(default)]
    pub toolchain: BTreeMap<String, String>,
    /// Wall-clock seconds the build took.
    #[serde(default)]
    pub compile_seconds: f64,
    /// When the entry was built, in seconds since the Unix epoch.
    pub created: u64,
    /// Number of translation units compiled.
    #[serde(default)]
    pub units: u32,
    /// Result of the audit step, opaque to the store.
    #[serde(default)]
    pub audit: Option<serde_json::Value>,
    /// The instruction-set extensions the library requires beyond the
    /// fixed baseline (`x86-64`, `armv8-a`), the compiler's own target
    /// included, each with the flag that required it (checked against the
    /// running CPU before a load). Always written (`[]` when none); a
    /// manifest without it does not parse, so requirements never recorded
    /// are never read as "none" (the entry is rebuilt or skipped).
    pub isa: Vec<abicache_isa::Requirement>,
    /// The device-code images the library carries (`sm_80`, `sm_90a`,
    /// `compute_90`), read from its CUDA fat binary at publish, in the
    /// order `abicache_fatbin::images_in_elf` gives them; empty (and absent
    /// from the JSON) for a library without device code. A load compares
    /// them with the visible GPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_images: Vec<String>,
}

impl Manifest {
    /// A manifest for `key` with `created` set to now and everything the
    /// caller has not measured yet left empty.
    pub fn new(
        key: impl Into<String>,
        name: impl Into<String>,
        payload: impl Into<String>,
    ) -> Self {
        Manifest {
            format: MANIFEST_FORMAT,
            key: key.into(),
            name: name.into(),
            payload: payload.into(),
            library: String::new(),
            library_blake3: String::new(),
            size: 0,
            toolchain: BTreeMap::new(),
            compile_seconds: 0.0,
            created: unix_now(),
            units: 0,
            audit: None,
            isa: Vec::new(),
            device_images: Vec::new(),
        }
    }

    /// The `format` of a manifest whose instruction-set requirements this
    /// abicache cannot trust, from its JSON bytes: one of an older format
    /// (format 1 recorded `isa` against the compiler's default target, and
    /// only when there was any) or one without `isa` (written by hand).
    /// `None` for a current manifest, a newer format, or bytes that are no
    /// manifest at all. Asked only after [`Manifest::from_json`] failed or
    /// found another format, to say why the entry is not served.
    pub fn unknown_requirements(bytes: &[u8]) -> Option<u32> {
        #[derive(Deserialize)]
        struct Head {
            format: u32,
            #[serde(default)]
            isa: Option<serde::de::IgnoredAny>,
        }
        let head: Head = serde_json::from_slice(bytes).ok()?;
        (head.format < MANIFEST_FORMAT || head.format == MANIFEST_FORMAT && head.isa.is_none())
            .then_some(head.format)
    }

    /// Parses a manifest from its JSON bytes; `path` is only used in the error.
    pub fn from_json(bytes: &[u8], path: &Path) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|source| StoreError::Json {
            action: "parse manifest",
            path: path.to_owned(),
            source,
        })
    }

    /// Reads and parses `path`: a regular file (never through a symlink,
    /// never blocking on a FIFO) of at most [`MAX_MANIFEST_SIZE`] bytes.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = read_bounded(path, Follow::No, MAX_MANIFEST_SIZE)?;
        Self::from_json(&bytes, path)
    }

    /// The pretty-printed JSON of this manifest.
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("a manifest always serializes");
        v.push(b'\n');
        v
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_keeps_audit_opaque() {
        let mut m = Manifest::new("k", "ext", "format=1\nname=ext\n");
        m.toolchain.insert("c++".into(), "g++ 13.2".into());
        m.audit = Some(serde_json::json!({"imports": ["PyLong_FromLong"], "x": 1}));
        let back = Manifest::from_json(&m.to_json(), Path::new("m.json")).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn device_images_are_absent_for_a_cpu_library_and_round_trip_for_a_cuda_one() {
        let mut m = Manifest::new("k", "ext", "format=1\nname=ext\n");
        let cpu = String::from_utf8(m.to_json()).unwrap();
        assert!(!cpu.contains("device_images"), "{cpu}");
        m.device_images = vec!["sm_80".into(), "sm_90a".into(), "compute_90".into()];
        let json = String::from_utf8(m.to_json()).unwrap();
        assert!(json.contains("\"device_images\""), "{json}");
        let back = Manifest::from_json(json.as_bytes(), Path::new("m.json")).unwrap();
        assert_eq!(back.device_images, m.device_images);
    }

    #[test]
    fn garbage_manifest_error_names_the_file() {
        let err = Manifest::from_json(b"{not json", Path::new("/c/v1/entries/k/manifest.json"))
            .unwrap_err();
        insta::assert_snapshot!(err.to_string());
    }
}
