//! Opening files that may be hostile: FIFOs, devices, symlinks, huge files.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
