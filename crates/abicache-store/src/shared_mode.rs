//! Whether a cache root is shared by many nodes: detection by `statfs`
//! magic number, and the decision `ABICACHE_SHARED` (`auto|on|off`) makes.
//!
//! Guarantees:
//! - **Detection** ([`filesystem_of`]): the root's `statfs(2)` `f_type` is
//!   looked up in [`NETWORK_FILESYSTEMS`]; a filesystem in that table is one
//!   another machine may write at the same time (network, cluster and FUSE
//!   filesystems: a FUSE daemon may serve a network share, `sshfs`, a
//!   parallel filesystem client). Anything else is local.
//! - **The decision** ([`CacheMode::decide`]): `on` and `off` win; `auto`
//!   is shared exactly when the filesystem is in the table. A root whose
//!   `statfs` fails in `auto` is local (the store opens it anyway and the
//!   reason says so).
//! - **Said why**: [`CacheMode::reason`] is one line for `abicache stats`
//!   (`shared: cache root is on fuse (statfs magic 0x65735546)`,
//!   `local: ABICACHE_SHARED=off`, …).

use std::path::Path;

use abicache_settings::SharedSetting;
use serde::Serialize;

/// Network, cluster and FUSE filesystems by their `statfs` magic number
/// (`f_type`), as the Linux kernel (`include/uapi/linux/magic.h` and the
/// filesystems' own headers) or their vendors define them.
///
/// | magic        | filesystem | where defined |
/// |--------------|------------|---------------|
/// | `0x6969`     | NFS (v2/v3/v4) | `NFS_SUPER_MAGIC`, magic.h |
/// | `0x65735546` | FUSE (sshfs, GlusterFS, virtiofs, MooseFS, Quobyte, s3fs, …) | `FUSE_SUPER_MAGIC`, fs/fuse |
/// | `0x0bd00bd0` | Lustre client | `LL_SUPER_MAGIC`, lustre_user.h |
/// | `0x47504653` | IBM GPFS / Spectrum Scale | `"GPFS"` (GPFS_SUPER_MAGIC) |
/// | `0x19830326` | BeeGFS | `BEEGFS_MAGIC`, BeeGFS client |
/// | `0xff534d42` | CIFS | `CIFS_SUPER_MAGIC`, magic.h |
/// | `0xfe534d42` | SMB2/3 | `SMB2_SUPER_MAGIC`, magic.h |
/// | `0x517b`     | SMB (old smbfs) | `SMB_SUPER_MAGIC`, magic.h |
/// | `0x01021997` | 9p (v9fs) | `V9FS_MAGIC`, magic.h |
/// | `0x00c36400` | CephFS | `CEPH_SUPER_MAGIC`, magic.h |
/// | `0x5346414f` | AFS (kAFS) | `AFS_SUPER_MAGIC`, magic.h |
/// | `0x6b414653` | OpenAFS | `AFS_FS_MAGIC`, magic.h |
/// | `0x7461636f` | OCFS2 | `OCFS2_SUPER_MAGIC`, magic.h |
/// | `0x01161970` | GFS2 | `GFS2_MAGIC`, gfs2_ondisk.h |
/// | `0xaad7aaea` | Panasas PanFS | `PAN_KERNEL_FS_CLIENT_SUPER_MAGIC` |
/// | `0x20030528` | OrangeFS / PVFS2 | `ORANGEFS_DEVREQ_MAGIC`, orangefs |
/// | `0x73757245` | Coda | `CODA_SUPER_MAGIC`, magic.h |
/// | `0x564c`     | NetWare (ncpfs) | `NCP_SUPER_MAGIC`, magic.h |
/// | `0x786f4256` | VirtualBox shared folder | `VBOXSF_SUPER_MAGIC`, vboxsf |
pub const NETWORK_FILESYSTEMS: &[(u32, &str)] = &[
    (0x6969, "nfs"),
    (0x6573_5546, "fuse"),
    (0x0bd0_0bd0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x1983_0326, "beegfs"),
    (0xff53_4d42, "cifs"),
    (0xfe53_4d42, "smb2"),
    (0x517b, "smb"),
    (0x0102_1997, "9p"),
    (0x00c3_6400, "ceph"),
    (0x5346_414f, "afs"),
    (0x6b41_4653, "openafs"),
    (0x7461_636f, "ocfs2"),
    (0x0116_1970, "gfs2"),
    (0xaad7_aaea, "panfs"),
    (0x2003_0528, "orangefs"),
    (0x7375_7245, "coda"),
    (0x564c, "ncpfs"),
    (0x786f_4256, "vboxsf"),
];

/// A few local filesystems by magic number, only to name them in reasons.
const LOCAL_FILESYSTEMS: &[(u32, &str)] = &[
    (0x0102_1994, "tmpfs"),
    (0xef53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683e, "btrfs"),
    (0x794c_7630, "overlayfs"),
    (0x2fc1_2fc1, "zfs"),
    (0x4d44, "vfat"),
    (0xf2f5_2010, "f2fs"),
];

/// The filesystem a path is on: its `statfs` magic and, when known, its name
/// and whether it is in [`NETWORK_FILESYSTEMS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Filesystem {
    /// `f_type` of `statfs(2)` (lower 32 bits).
    pub magic: u32,
    /// Its name, when in one of the tables (`nfs`, `fuse`, `tmpfs`, …).
    pub name: Option<&'static str>,
    /// True when another machine may write it at the same time.
    pub network: bool,
}

/// The filesystem `path` is on (`statfs(2)`).
pub fn filesystem_of(path: &Path) -> std::io::Result<Filesystem> {
    let stat = rustix::fs::statfs(path)?;
    // `f_type` is a signed word of varying width; the magics are 32-bit.
    #[allow(clippy::unnecessary_cast)]
    let magic = (stat.f_type as u64 & 0xffff_ffff) as u32;
    Ok(classify(magic))
}

/// The [`Filesystem`] of a `statfs` magic number.
pub fn classify(magic: u32) -> Filesystem {
    let find = |table: &[(u32, &'static str)]| {
        table
            .iter()
            .find(|(m, _)| *m == magic)
            .map(|(_, name)| *name)
    };
    match find(NETWORK_FILESYSTEMS) {
        Some(name) => Filesystem {
            magic,
            name: Some(name),
            network: true,
        },
        None => Filesystem {
            magic,
            name: find(LOCAL_FILESYSTEMS),
            network: false,
        },
    }
}

/// Whether a store runs in shared mode, and why (for `abicache stats`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheMode {
    /// True in shared mode: leases instead of cross-node locks, one counter
    /// log per host, hits re-hash the library, gc under a cache-wide lease.
    pub shared: bool,
    /// One line: the mode and why (`shared: cache root is on nfs (statfs magic 0x6969)`).
    pub reason: String,
    /// The setting that decided (`auto`, `on`, `off`).
    pub setting: &'static str,
    /// The cache root's filesystem, when `statfs` answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<Filesystem>,
}

impl CacheMode {
    /// Decides the mode of the cache at `root` under `setting` (see the
    /// module's guarantees). Never fails.
    pub fn decide(root: &Path, setting: SharedSetting) -> CacheMode {
        let filesystem = filesystem_of(root);
        Self::from_parts(setting, filesystem)
    }

    /// The decision from the setting and what `statfs` said.
    pub(crate) fn from_parts(
        setting: SharedSetting,
        filesystem: std::io::Result<Filesystem>,
    ) -> CacheMode {
        let describe = |fs: &Filesystem| {
            format!(
                "{} (statfs magic {:#x})",
                fs.name.unwrap_or("an unlisted filesystem"),
                fs.magic
            )
        };
        let (shared, reason) = match (setting, &filesystem) {
            (SharedSetting::On, _) => (true, "shared: ABICACHE_SHARED=on".to_owned()),
            (SharedSetting::Off, _) => (false, "local: ABICACHE_SHARED=off".to_owned()),
            (SharedSetting::Auto, Ok(fs)) if fs.network => {
                (true, format!("shared: cache root is on {}", describe(fs)))
            }
            (SharedSetting::Auto, Ok(fs)) => {
                (false, format!("local: cache root is on {}", describe(fs)))
            }
            (SharedSetting::Auto, Err(e)) => (
                false,
                format!("local: statfs of the cache root failed ({e})"),
            ),
        };
        CacheMode {
            shared,
            reason,
            setting: setting.as_str(),
            filesystem: filesystem.ok(),
        }
    }

    /// Local mode, as a store that was never asked (tests, read-only tools).
    pub fn local() -> CacheMode {
        Self::from_parts(SharedSetting::Off, Err(std::io::Error::other("not asked")))
    }

    /// Shared mode forced on (`ABICACHE_SHARED=on`), whatever the filesystem.
    pub fn forced_shared() -> CacheMode {
        Self::from_parts(SharedSetting::On, Err(std::io::Error::other("not asked")))
    }
}

impl Default for CacheMode {
    /// [`CacheMode::local`].
    fn default() -> Self {
        CacheMode::local()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_shm_is_tmpfs_and_local() {
        let fs = filesystem_of(Path::new("/dev/shm")).expect("statfs /dev/shm");
        assert_eq!(fs.magic, 0x0102_1994, "{fs:?}");
        assert_eq!(fs.name, Some("tmpfs"));
        let mode = CacheMode::decide(Path::new("/dev/shm"), SharedSetting::Auto);
        assert!(!mode.shared);
        assert_eq!(
            mode.reason,
            "local: cache root is on tmpfs (statfs magic 0x1021994)"
        );
    }

    #[test]
    fn the_table_names_the_usual_cluster_filesystems() {
        for (magic, name) in [
            (0x6969, "nfs"),
            (0x6573_5546, "fuse"),
            (0x0bd0_0bd0, "lustre"),
            (0x4750_4653, "gpfs"),
            (0x1983_0326, "beegfs"),
            (0xfe53_4d42, "smb2"),
            (0x0102_1997, "9p"),
            (0x00c3_6400, "ceph"),
        ] {
            let fs = classify(magic);
            assert!(fs.network, "{name}");
            assert_eq!(fs.name, Some(name));
        }
        let fuse = CacheMode::from_parts(SharedSetting::Auto, Ok(classify(0x6573_5546)));
        assert!(fuse.shared);
        assert_eq!(
            fuse.reason,
            "shared: cache root is on fuse (statfs magic 0x65735546)"
        );
    }

    #[test]
    fn on_and_off_win_over_the_filesystem() {
        let on = CacheMode::from_parts(SharedSetting::On, Ok(classify(0x0102_1994)));
        assert!(on.shared);
        assert_eq!(on.reason, "shared: ABICACHE_SHARED=on");
        let off = CacheMode::from_parts(SharedSetting::Off, Ok(classify(0x6969)));
        assert!(!off.shared);
        assert_eq!(off.reason, "local: ABICACHE_SHARED=off");
    }

    #[test]
    fn a_fuse_mount_is_shared_when_one_is_mounted() {
        // Any FUSE mount this machine has (e.g. the two-node test bed's
        // sshfs) must be detected; without one there is nothing to check.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let Some(point) = mounts
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let point = f.nth(1)?;
                let kind = f.next()?;
                kind.starts_with("fuse").then(|| point.to_owned())
            })
            .find(|p| std::fs::metadata(p).is_ok())
        else {
            eprintln!("skipped: no readable FUSE mount on this machine");
            return;
        };
        let fs = filesystem_of(Path::new(&point)).unwrap();
        assert_eq!(fs.name, Some("fuse"), "{point}: {fs:?}");
        assert!(CacheMode::decide(Path::new(&point), SharedSetting::Auto).shared);
    }
}
