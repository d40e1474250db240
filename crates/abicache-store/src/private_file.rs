//! Files and directories the store writes: owner-only whatever the umask,
//! replaced atomically.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of every file the store writes, except libraries.
pub(crate) const FILE_MODE: u32 = 0o600;
/// Mode of libraries and of every directory the store creates.
pub(crate) const DIR_MODE: u32 = 0o700;

/// Opens an existing file for appending; never through a symlink, never
/// blocking on a FIFO.
pub(crate) fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

/// Sets `file`'s access and modification times to now with `UTIME_NOW`, so
/// a file server that sets times itself (NFS) uses its own clock.
pub(crate) fn set_times_now(file: &std::fs::File) -> std::io::Result<()> {
    use rustix::fs::{futimens, Timestamps, UTIME_NOW};
    let now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: UTIME_NOW,
    };
    futimens(
        file,
        &Timestamps {
            last_access: now,
            last_modification: now,
        },
    )
    .map_err(Into::into)
}

/// Replaces `path` with `bytes`: written to a fresh owner-only file in
/// `tmp_dir` (same filesystem), then renamed over `path`, so a reader sees
/// the old or the new content, never a mix.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], tmp_dir: &Path) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".write-")
        .permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .tempfile_in(tmp_dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Sets every file under `dir` to [`FILE_MODE`] (`executable` to
/// [`DIR_MODE`]) and every directory, `dir` included, to [`DIR_MODE`],
/// whatever the umask was when the compiler and linker created them.
/// Symlinks are left alone (publish refuses a symlinked library anyway).
pub(crate) fn make_private_tree(dir: &Path, executable: &Path) -> std::io::Result<()> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            make_private_tree(&path, executable)?;
        } else if kind.is_file() {
            let mode = if path == executable {
                DIR_MODE
            } else {
                FILE_MODE
            };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}
