//! Opening files that may be hostile: FIFOs, devices, symlinks, huge files.

use std::collections::HashMap;
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::error::{FsError, Result};

/// Whether the last path component may be a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow a symlink (user inputs: sources, specs).
    Yes,
    /// Refuse a symlink (`O_NOFOLLOW`: everything inside the cache).
    No,
}

/// Opens `path` for reading without blocking on a FIFO and returns it with
/// its metadata, or an error when it is not a regular file (or, with
/// [`Follow::No`], when it is a symlink).
pub fn open_regular(path: &Path, follow: Follow) -> Result<(File, Metadata)> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if follow == Follow::No {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if follow == Follow::No && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(FsError::Symlink {
                path: path.to_owned(),
            })
        }
        Err(e) => return Err(FsError::io(path, e)),
    };
    regular(file, path)
}

/// `file`'s metadata when it is a regular file, else the error naming
/// what it is instead.
fn regular(file: File, path: &Path) -> Result<(File, Metadata)> {
    let meta = file.metadata().map_err(|e| FsError::io(path, e))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_fifo() {
            "FIFO"
        } else if ft.is_dir() {
            "directory"
        } else if ft.is_char_device() {
            "character device"
        } else if ft.is_block_device() {
            "block device"
        } else if ft.is_socket() {
            "socket"
        } else {
            "special file"
        };
        return Err(FsError::NotRegular {
            path: path.to_owned(),
            kind,
        });
    }
    Ok((file, meta))
}

/// Reads a whole regular file of at most `cap` bytes (see [`open_regular`]).
/// A file that grows past `cap` while being read is refused too.
pub fn read_bounded(path: &Path, follow: Follow, cap: u64) -> Result<Vec<u8>> {
    let (file, meta) = open_regular(path, follow)?;
    if meta.len() > cap {
        return Err(FsError::TooLarge {
            path: path.to_owned(),
            size: meta.len(),
            cap,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::io(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(FsError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
            cap,
        });
    }
    Ok(bytes)
}

/// How many directories a [`DirHandles`] keeps open at most; files in
/// further directories are opened by their whole path.
const MAX_DIR_HANDLES: usize = 256;

/// Opens many files of a few directories the way [`open_regular`] does,
/// with [`Follow::Yes`], but relative to a handle on each file's directory
/// (`openat`), kept open from file to file: the kernel then resolves one
/// name per file instead of every component of its path. Any failure on
/// that way (including a directory that cannot be opened) falls back to
/// [`open_regular`] on the whole path, so results and errors are those of
/// [`open_regular`]; a directory renamed or replaced while its handle is
/// held is still read through the handle, as a file opened before the
/// change would be.
#[derive(Debug, Default)]
pub struct DirHandles {
    /// Each directory's index in `handles`.
    index: HashMap<Box<[u8]>, usize>,
    /// Each directory's `O_PATH` handle, or `None` when it could not be
    /// opened (its files are then opened by path).
    handles: Vec<Option<OwnedFd>>,
    /// The directory used last and its index (`None`: none yet):
    /// consecutive files usually share it.
    last: Vec<u8>,
    /// See `last`.
    last_index: Option<usize>,
}

impl DirHandles {
    /// Opens `path` (see [`open_regular`] with [`Follow::Yes`]).
    pub fn open_regular(&mut self, path: &Path) -> Result<(File, Metadata)> {
        if let Some(file) = self.open_at(path) {
            if let Ok(opened) = regular(file, path) {
                return Ok(opened);
            }
        }
        open_regular(path, Follow::Yes)
    }

    /// `path` opened relative to its directory's handle, or `None` when
    /// that is not possible (no parent, a path not ending in its name,
    /// too many directories, any error).
    fn open_at(&mut self, path: &Path) -> Option<File> {
        let parent = path.parent()?.as_os_str().as_bytes();
        let name = path.file_name()?.as_bytes();
        if parent.is_empty() || !path.as_os_str().as_bytes().ends_with(name) {
            return None;
        }
        let dir = self.dir(parent)?;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        rustix::fs::openat(dir, name, flags, Mode::empty())
            .ok()
            .map(File::from)
    }

    /// The handle of directory `parent`, opened on first use.
    fn dir(&mut self, parent: &[u8]) -> Option<&OwnedFd> {
        let index = match self.last_index.filter(|_| self.last == parent) {
            Some(i) => i,
            None => {
                let i = match self.index.get(parent) {
                    Some(&i) => i,
                    None if self.handles.len() < MAX_DIR_HANDLES => {
                        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                        let handle = rustix::fs::open(parent, flags, Mode::empty()).ok();
                        self.handles.push(handle);
                        self.index.insert(parent.into(), self.handles.len() - 1);
                        self.handles.len() - 1
                    }
                    None => return None,
                };
                self.last.clear();
                self.last.extend_from_slice(parent);
                self.last_index = Some(i);
                i
            }
        };
        self.handles[index].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = open_regular(&fifo, Follow::Yes).unwrap_err();
        assert!(
            matches!(err, FsError::NotRegular { kind: "FIFO", .. }),
            "{err}"
        );
    }

    #[test]
    fn a_device_and_a_directory_are_refused() {
        let err = read_bounded(Path::new("/dev/zero"), Follow::Yes, 1 << 20).unwrap_err();
        assert!(matches!(err, FsError::NotRegular { .. }), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = open_regular(dir.path(), Follow::Yes).unwrap_err();
        assert!(
            matches!(
                err,
                FsError::NotRegular {
                    kind: "directory",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_symlink_is_followed_or_refused_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_bounded(&link, Follow::Yes, 10).unwrap(), b"x");
        let err = read_bounded(&link, Follow::No, 10).unwrap_err();
        assert!(matches!(err, FsError::Symlink { .. }), "{err}");
        // A symlink to a device is refused even when followed.
        let dev = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &dev).unwrap();
        assert!(matches!(
            read_bounded(&dev, Follow::Yes, 10).unwrap_err(),
            FsError::NotRegular { .. }
        ));
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![0u8; 11]).unwrap();
        let err = read_bounded(&path, Follow::Yes, 10).unwrap_err();
        assert!(
            matches!(
                err,
                FsError::TooLarge {
                    size: 11,
                    cap: 10,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(read_bounded(&path, Follow::Yes, 11).unwrap().len(), 11);
    }

    #[test]
    fn dir_handles_open_what_open_regular_opens_and_refuse_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("a.h"), "a").unwrap();
        std::fs::write(dir.path().join("b.h"), "b").unwrap();
        std::os::unix::fs::symlink(sub.join("a.h"), sub.join("link.h")).unwrap();
        let fifo = sub.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let mut dirs = DirHandles::default();
        let read = |dirs: &mut DirHandles, p: &Path| {
            let (mut f, meta) = dirs.open_regular(p).unwrap();
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            assert_eq!(meta.len(), s.len() as u64);
            s
        };
        for _ in 0..2 {
            assert_eq!(read(&mut dirs, &sub.join("a.h")), "a");
            assert_eq!(read(&mut dirs, &dir.path().join("b.h")), "b");
            assert_eq!(read(&mut dirs, &sub.join("link.h")), "a");
            assert_eq!(read(&mut dirs, &sub.join("../b.h")), "b");
        }
        let err = dirs.open_regular(&fifo).unwrap_err();
        assert!(
            matches!(err, FsError::NotRegular { kind: "FIFO", .. }),
            "{err}"
        );
        for odd in [sub.clone(), sub.join("."), sub.join("..")] {
            let err = dirs.open_regular(&odd).unwrap_err();
            assert!(
                matches!(
                    err,
                    FsError::NotRegular {
                        kind: "directory",
                        ..
                    }
                ),
                "{err}"
            );
        }
        let missing = dirs.open_regular(&sub.join("missing.h")).unwrap_err();
        let expected = open_regular(&sub.join("missing.h"), Follow::Yes).unwrap_err();
        assert_eq!(missing.to_string(), expected.to_string());
        let trailing = PathBuf::from(format!("{}/", sub.join("a.h").display()));
        assert!(dirs.open_regular(&trailing).is_err());
        // Past the cap on handles, files are opened by path.
        for i in 0..MAX_DIR_HANDLES + 3 {
            let d = dir.path().join(format!("d{i}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("x.h"), format!("{i}")).unwrap();
            assert_eq!(read(&mut dirs, &d.join("x.h")), i.to_string());
        }
    }
}
