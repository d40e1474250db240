//! The stat stamp of an entry's library, remembered after a full check
//! (`verified.json` next to the manifest) so a later hit costs no re-hash.

use std::path::Path;

use abicache_fs::{read_bounded, FileStamp, Follow};
use serde::{Deserialize, Serialize};

use crate::layout::STAMP_FILE;
use crate::private_file::write_atomic;

/// The content of `verified.json`.
#[derive(Debug, Serialize, Deserialize)]
struct StampRecord {
    /// The library's stamp when its size and BLAKE3 last matched the manifest.
    library: FileStamp,
}

/// The stamp recorded in the entry directory `dir`, if any (a missing,
/// unreadable or garbled file is no stamp: the next check hashes).
pub(crate) fn read(dir: &Path) -> Option<FileStamp> {
    let bytes = read_bounded(&dir.join(STAMP_FILE), Follow::No, 4096).ok()?;
    serde_json::from_slice::<StampRecord>(&bytes)
        .ok()
        .map(|r| r.library)
}

/// Records `stamp` in `dir`, atomically (through `tmp_dir`). Best effort: on
/// a read-only or full cache nothing is written and the next hit hashes again.
pub(crate) fn write(dir: &Path, stamp: FileStamp, tmp_dir: &Path) {
    let record = StampRecord { library: stamp };
    if let Ok(bytes) = serde_json::to_vec(&record) {
        let _ = write_atomic(&dir.join(STAMP_FILE), &bytes, tmp_dir);
    }
}
