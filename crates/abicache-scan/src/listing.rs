//! Directory listings for include resolution: once many names have been
//! looked up in one directory, its entries are read once and the remaining
//! lookups in it are answered from memory instead of a `lstat` each.
//!
//! A tree of thousands of headers spread over a few directories otherwise
//! pays a full kernel path walk per candidate; one listing costs about as
//! much as a handful of `lstat`s.
//!
//! Guarantees, per scan (a [`crate::Resolver`] lives for one scan, so a
//! file created after a listing is seen by the next scan):
//! - only an entry the listing says is a regular file is answered as one
//!   (what `lstat` would say at the moment of the listing); a symlink, or an
//!   entry whose type the listing does not give, is looked up as before
//!   (`lstat`, then `stat` for a symlink);
//! - a name missing from the listing is answered "absent" only when the
//!   directory was checked to compare names exactly: a case-insensitive
//!   directory (ext4 casefold, vfat, a Windows mount) finds `Foo.h` for
//!   `foo.h`, so there every name the listing lacks is looked up as before;
//! - the directory itself was `stat`ed before the listing (its stamp is what
//!   the stat cache and the key memo depend on), so an entry created or
//!   removed during the scan changes that stamp and is caught exactly as
//!   with one `lstat` per name.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use crate::fast_hash::FastMap;

/// What a listing says about one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// No entry of that name (exactly).
    Absent,
    /// A regular file (not a symlink).
    File,
    /// A directory, FIFO, device or socket: not a file.
    Other,
    /// Unknown (not listed yet, a symlink, an untyped entry, or a name
    /// the listing cannot answer for): look it up.
    Look,
}

/// One entry's type, as the listing gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Other,
    /// A symlink (its target decides): looked up.
    Link,
}

/// The listings of the directories looked up in by one scan, by the index
/// the resolver gives each directory it enters.
#[derive(Debug, Default)]
pub(crate) struct Listings {
    dirs: Vec<Dir>,
}

#[derive(Debug)]
struct Dir {
    /// Lookups made in it so far.
    lookups: u32,
    /// How many lookups before it is listed.
    list_after: u32,
    /// Its entries once listed (`None` inside: listing failed).
    entries: Option<Option<Entries>>,
}

#[derive(Debug)]
struct Entries {
    kinds: FastMap<OsString, Kind>,
    /// Whether a name missing from `kinds` is truly absent (names compare
    /// exactly in this directory).
    exact: bool,
}

impl Listings {
    /// Registers a directory of `size` bytes (its `st_size`, a rough
    /// measure of how many entries it has) and returns its index.
    pub(crate) fn add(&mut self, size: u64) -> u32 {
        let at = u32::try_from(self.dirs.len()).expect("fewer than 2^32 directories");
        let list_after = (size / BYTES_PER_LOOKUP).clamp(LIST_AFTER_MIN, LIST_AFTER_MAX) as u32;
        self.dirs.push(Dir {
            lookups: 0,
            list_after,
            entries: None,
        });
        at
    }

    /// What the listing of directory `at` (at path `dir`) says about
    /// `name`, the last component of `candidate` (the full path about to
    /// be looked up); lists the directory once enough names were asked.
    pub(crate) fn lookup(&mut self, at: u32, dir: &Path, candidate: &Path, name: &OsStr) -> Listed {
        // Only a candidate that is exactly `dir/name` (no trailing `/` or
        // `/.`, which make the kernel want a directory) is answered here.
        let text = candidate.as_os_str().as_bytes();
        let tail = name.as_bytes();
        let plain = text.len() > tail.len()
            && text.ends_with(tail)
            && text[text.len() - tail.len() - 1] == b'/'
            && !tail.is_empty()
            && tail != b"."
            && tail != b"..";
        if !plain {
            return Listed::Look;
        }
        let d = &mut self.dirs[at as usize];
        if d.entries.is_none() {
            d.lookups += 1;
            if d.lookups < d.list_after {
                return Listed::Look;
            }
            d.entries = Some(list(dir));
        }
        let Some(Some(entries)) = &d.entries else {
            return Listed::Look;
        };
        match entries.kinds.get(name) {
            Some(Kind::File) => Listed::File,
            Some(Kind::Other) => Listed::Other,
            Some(Kind::Link) => Listed::Look,
            None if entries.exact => Listed::Absent,
            None => Listed::Look,
        }
    }
}

/// Lookups in a directory before it is listed, per this many bytes of its
/// `st_size` (ext4: a 4 KiB block holds ~100 short names, and listing
/// them costs about as much as ~8 `lstat`s).
const BYTES_PER_LOOKUP: u64 = 512;
const LIST_AFTER_MIN: u64 = 8;
const LIST_AFTER_MAX: u64 = 4096;

/// The entries of `dir`, with whether names compare exactly in it; `None`
/// when it cannot be read.
fn list(dir: &Path) -> Option<Entries> {
    let mut kinds = FastMap::default();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        // `d_type` when the file system gives it (else one `lstat`).
        let kind = match entry.file_type() {
            Ok(t) if t.is_file() => Kind::File,
            Ok(t) if t.is_symlink() => Kind::Link,
            Ok(_) => Kind::Other,
            Err(_) => Kind::Link,
        };
        kinds.insert(entry.file_name(), kind);
    }
    let exact = compares_exactly(dir, &kinds);
    Some(Entries { kinds, exact })
}

/// Whether `dir` (with entries `kinds`) tells names apart exactly: one
/// listed name with its ASCII case swapped, not itself listed, must be
/// absent. False when no name can be tried (nothing with a letter).
fn compares_exactly(dir: &Path, kinds: &FastMap<OsString, Kind>) -> bool {
    let swapped = kinds.keys().find_map(|name| {
        let bytes = name.as_bytes();
        if !bytes.iter().any(u8::is_ascii_alphabetic) {
            return None;
        }
        let other: Vec<u8> = bytes
            .iter()
            .map(|&b| {
                if b.is_ascii_lowercase() {
                    b.to_ascii_uppercase()
                } else {
                    b.to_ascii_lowercase()
                }
            })
            .collect();
        let other = OsString::from_vec(other);
        (!kinds.contains_key(&other)).then_some(other)
    });
    swapped.is_some_and(|other| {
        std::fs::symlink_metadata(dir.join(other))
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(dir: &Path, names: &[&str]) -> Vec<Listed> {
        let mut l = Listings::default();
        let at = l.add(0);
        // Enough lookups to list it.
        for _ in 0..LIST_AFTER_MIN {
            l.lookup(at, dir, &dir.join("zz"), OsStr::new("zz"));
        }
        names
            .iter()
            .map(|n| l.lookup(at, dir, &dir.join(n), OsStr::new(n)))
            .collect()
    }

    #[test]
    fn a_listed_directory_answers_files_absences_and_others() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.h"), "").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("a.h", d.path().join("l.h")).unwrap();
        let got = listed(d.path(), &["a.h", "b.h", "sub", "l.h"]);
        assert_eq!(
            got,
            [Listed::File, Listed::Absent, Listed::Other, Listed::Look]
        );
    }

    #[test]
    fn nothing_is_answered_before_enough_lookups() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.h"), "").unwrap();
        let mut l = Listings::default();
        let at = l.add(0);
        let a = d.path().join("a.h");
        assert_eq!(l.lookup(at, d.path(), &a, OsStr::new("a.h")), Listed::Look);
    }

    #[test]
    fn a_candidate_that_is_not_plainly_dir_slash_name_is_looked_up() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.h"), "").unwrap();
        let mut l = Listings::default();
        let at = l.add(0);
        for _ in 0..LIST_AFTER_MIN {
            l.lookup(at, d.path(), &d.path().join("zz"), OsStr::new("zz"));
        }
        // `a.h/` names a directory for the kernel: not a file.
        let slash = Path::new(d.path()).join("a.h/");
        assert_eq!(
            l.lookup(at, d.path(), &slash, OsStr::new("a.h")),
            Listed::Look
        );
    }

    #[test]
    fn a_directory_without_a_name_to_check_case_with_answers_no_absence() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("123"), "").unwrap();
        assert_eq!(
            listed(d.path(), &["456", "123"]),
            [Listed::Look, Listed::File]
        );
    }
}
