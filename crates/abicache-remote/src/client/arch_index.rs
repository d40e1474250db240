//! The remote's arch-free index: which uploaded entries differ only in
//! their CUDA arch list, and the device images each carries, for the
//! covering lookup (`abicache::covering`).
//!
//! Layout: one empty marker blob per entry, `v1/arch-free/<arch-free
//! key>/<key>.<image>.<image>…` (`…/3f…9a.sm_80.sm_90`), written after the
//! entry's blob by [`Remote::upload`] on backends that can list (S3,
//! `file://`; not Redis, whose covering lookup then finds nothing). One
//! `list` call answers a lookup, with no blob read.
//!
//! Consistency under concurrent uploads and deletions: markers are written
//! after their entry and never rewritten (a marker's name says everything),
//! so uploads never contend; a marker whose entry is gone or fails the gate
//! is a miss, since every candidate is then fetched and checked as any key.

use abicache_store::{ArchIndexed, Manifest};
use opendal::ErrorKind;

use super::{Remote, ENTRY_DIR};
use crate::error::{RemoteError, Result};

/// The folder of arch-free markers under [`ENTRY_DIR`].
const ARCH_FREE_DIR: &str = "arch-free";

/// The marker of `manifest`'s entry, `None` for an entry without an
/// arch-free key (CPU, or archs chosen by the user's nvcc flags) or with an
/// image name a marker cannot carry.
fn marker(manifest: &Manifest) -> Option<String> {
    let arch_free = abicache_store::arch_free_key(&manifest.payload)?;
    let images = abicache_store::entry_images(manifest);
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !plain(&manifest.key) || !images.iter().all(|i| plain(i)) {
        return None;
    }
    let mut name = format!("{ENTRY_DIR}/{ARCH_FREE_DIR}/{arch_free}/{}", manifest.key);
    for image in &images {
        name.push('.');
        name.push_str(image);
    }
    Some(name)
}

/// A marker's file name as an index line (`None` when it is not one).
fn parse_marker(file_name: &str) -> Option<ArchIndexed> {
    let mut parts = file_name.trim_end_matches('/').split('.');
    let key = parts.next()?;
    let hex = |s: &str| s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(key) {
        return None;
    }
    let images: Vec<String> = parts.map(str::to_owned).collect();
    (!images.is_empty()).then(|| ArchIndexed {
        key: key.to_owned(),
        images,
    })
}

impl Remote {
    /// Writes the arch-free marker of an uploaded entry, when the backend
    /// can list and the entry has an arch-free key.
    pub(super) fn index_arch_free(&self, manifest: &Manifest) -> Result<()> {
        if !self.op.info().full_capability().list {
            return Ok(());
        }
        match marker(manifest) {
            Some(marker) => self.write_raw(&marker, Vec::new()),
            None => Ok(()),
        }
    }

    /// The entries uploaded under `arch_free`, sorted by key, each with its
    /// images as its marker names them (unverified: candidates only).
    /// [`RemoteError::CannotList`] on a backend that cannot list.
    pub fn arch_free_entries(&self, arch_free: &str) -> Result<Vec<ArchIndexed>> {
        if !self.op.info().full_capability().list {
            return Err(RemoteError::CannotList {
                url: self.config.url.clone(),
            });
        }
        let dir = format!("{ENTRY_DIR}/{ARCH_FREE_DIR}/{arch_free}/");
        let listed = match self.bounded("list", &dir, self.op.list(&dir)) {
            Err(RemoteError::Backend { source, .. }) if source.kind() == ErrorKind::NotFound => {
                Vec::new()
            }
            other => other?,
        };
        let mut out: Vec<ArchIndexed> = listed
            .iter()
            .filter_map(|e| parse_marker(e.name()))
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key).then(a.images.cmp(&b.images)));
        out.dedup_by(|a, b| a.key == b.key);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_names_the_entry_and_its_images_and_parses_back() {
        let payload = "format=1\nname=ext\ncuda_archs=-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90\n";
        let key = "a".repeat(32);
        let manifest = Manifest::new(&key, "ext", payload);
        let marker = marker(&manifest).unwrap();
        let arch_free = abicache_store::arch_free_key(payload).unwrap();
        assert_eq!(
            marker,
            format!("v1/arch-free/{arch_free}/{key}.sm_80.sm_90")
        );
        let line = parse_marker(marker.rsplit('/').next().unwrap()).unwrap();
        assert_eq!(line.key, key);
        assert_eq!(line.images, ["sm_80", "sm_90"]);
        assert_eq!(marker_of_cpu(), None);
        assert_eq!(parse_marker("not-a-key.sm_80"), None);
        assert_eq!(parse_marker(&key), None, "no images");
    }

    fn marker_of_cpu() -> Option<String> {
        marker(&Manifest::new(
            "b".repeat(32),
            "ext",
            "format=1\nname=ext\n",
        ))
    }
}
