//! Which machine (boot) this process runs on, for a cache shared by many.
//!
//! A host is its hostname (`uname`, so a UTS namespace has its own) and its
//! boot id (`/proc/sys/kernel/random/boot_id`: a reboot is another host, and
//! so is a node of a test bed that bind-mounts its own boot id there). Two
//! processes on one host also share a pid namespace when their
//! [`HostId::pid_namespace`] agree: only then does a pid name the same
//! process for both, and only then is "that pid is dead" a fact.

use std::sync::OnceLock;

/// This process's host (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostId {
    /// `uname -n`.
    pub hostname: String,
    /// The kernel's boot id (a UUID), `unknown` when unreadable.
    pub boot_id: String,
    /// The pid namespace (`/proc/self/ns/pid`'s link, e.g. `pid:[4026531836]`).
    pub pid_namespace: String,
}

impl HostId {
    /// This process's host, read once per process.
    pub fn current() -> &'static HostId {
        static HOST: OnceLock<HostId> = OnceLock::new();
        HOST.get_or_init(|| {
            let read = |path: &str| {
                std::fs::read_to_string(path)
                    .map(|s| s.trim().to_owned())
                    .ok()
                    .filter(|s| !s.is_empty())
            };
            HostId {
                // The UTS namespace's node name, as `uname -n` gives it.
                hostname: read("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".to_owned()),
                boot_id: read("/proc/sys/kernel/random/boot_id")
                    .unwrap_or_else(|| "unknown".to_owned()),
                pid_namespace: std::fs::read_link("/proc/self/ns/pid")
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            }
        })
    }

    /// A file-name-safe tag naming this host and boot: the hostname (only
    /// `[A-Za-z0-9._-]` kept, at most 64 characters) and the first 8
    /// characters of the boot id. Unique per host and boot; the same for
    /// every process of one boot of one host.
    pub fn file_tag(&self) -> String {
        let host: String = self
            .hostname
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let boot: String = self
            .boot_id
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(8)
            .collect();
        format!("{host}-{boot}")
    }
}

/// True when no process with `pid` exists in this pid namespace.
pub(crate) fn pid_is_dead(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_has_a_name_a_boot_id_and_a_tag_safe_in_file_names() {
        let host = HostId::current();
        assert!(!host.hostname.is_empty());
        assert_eq!(host.boot_id.len(), 36, "{host:?}");
        let tag = host.file_tag();
        assert!(tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(tag.ends_with(&host.boot_id[..8]), "{tag}");
        let odd = HostId {
            hostname: "a/b c".into(),
            boot_id: "0123abcd-ffff".into(),
            pid_namespace: String::new(),
        };
        assert_eq!(odd.file_tag(), "a_b_c-0123abcd");
    }

    #[test]
    fn this_process_is_alive_and_an_unused_pid_is_dead() {
        assert!(!pid_is_dead(std::process::id()));
        assert!(pid_is_dead(u32::try_from(i32::MAX).unwrap() - 1));
    }
}
