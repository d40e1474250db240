//! Command lines for a launcher that sends compiles to other machines
//! (distcc, icecream: [`crate::launcher_distributes`]), with no absolute path
//! of this machine's checkout or cache in them.
//!
//! Such a launcher preprocesses here and sends the rest of the command line
//! (the source's and the object's names, `-ffile-prefix-map`, the other
//! compiler flags) to a server that may belong to someone else. The compile
//! therefore runs in a private directory ([`LaunchDir`], mode 0700 under
//! `TMPDIR`) holding two links: `src` to the directory compilers run in (the
//! fingerprint root) and `out` to the object cache. Then:
//! - the source is `src/<path under the root>`, the object `out/<name>`;
//! - a relative directory of `-I`, `-iquote`, `-isystem`, `-idirafter` and a
//!   relative file of `-include`, `-imacros` get `src/` in front;
//! - `-ffile-prefix-map=<root>=.` becomes `-ffile-prefix-map=src/=`, so
//!   `__FILE__` and the object's bytes are those of a local compile.
//!
//! Paths outside the root stay absolute, because nothing relative reaches
//! them: the compiler itself, torch's, Python's and CUDA's include
//! directories, a precompiled header's `-include` (all read by the local
//! preprocessor, which distcc strips from what it sends), and a source or
//! include directory outside the root.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::flags::CompileCommand;

/// Options whose next argument (or joined value) is an include directory or
/// file, resolved against the compiler's working directory when relative.
const PATH_OPTIONS: [&str; 6] = [
    "-I",
    "-iquote",
    "-isystem",
    "-idirafter",
    "-include",
    "-imacros",
];

/// The private directory a distributed compile runs in; removed when dropped.
#[derive(Debug)]
pub(crate) struct LaunchDir {
    dir: PathBuf,
    /// Where `src` points: the directory compilers run in.
    root: PathBuf,
    /// Where `out` points: the object cache.
    objects: PathBuf,
}

impl LaunchDir {
    /// Creates it under `TMPDIR` (a new name, mode 0700, never an existing
    /// directory) with `src` → `root` and `out` → `objects`.
    pub(crate) fn new(root: &Path, objects: &Path) -> std::io::Result<LaunchDir> {
        use std::os::unix::fs::DirBuilderExt;
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut attempt = 0;
        let dir = loop {
            let dir = base.join(format!(
                "abicache-launch-{}-{}-{nanos:x}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst)
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1;
                }
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("create `{}`: {e}", dir.display()),
                    ))
                }
            }
        };
        let launch = LaunchDir {
            dir,
            root: root.to_path_buf(),
            objects: objects.to_path_buf(),
        };
        for (name, target) in [("src", root), ("out", objects)] {
            let link = launch.dir.join(name);
            std::os::unix::fs::symlink(target, &link).map_err(|e| {
                std::io::Error::new(e.kind(), format!("link `{}`: {e}", link.display()))
            })?;
        }
        Ok(launch)
    }

    /// The directory the compile runs in.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// `command`'s argv as it runs in [`LaunchDir::path`] (see the module docs).
    pub(crate) fn argv(&self, command: &CompileCommand) -> Vec<String> {
        let mut rewritten = command.clone();
        rewritten.flags = self.flags(&command.flags);
        rewritten.unkeyed_flags = self.flags(&command.unkeyed_flags);
        rewritten.source = self.under_src(&command.source);
        if command.output.parent() == Some(self.objects.as_path()) {
            if let Some(name) = command.output.file_name() {
                rewritten.output = Path::new("out").join(name);
            }
        }
        rewritten.argv()
    }

    fn flags(&self, flags: &[String]) -> Vec<String> {
        let prefix_map = format!("-ffile-prefix-map={}=.", self.root.display());
        let mut out = Vec::with_capacity(flags.len());
        let mut path_follows = false;
        for flag in flags {
            if std::mem::take(&mut path_follows) {
                out.push(self.under_src(Path::new(flag)).display().to_string());
                continue;
            }
            if *flag == prefix_map {
                out.push("-ffile-prefix-map=src/=".to_string());
                continue;
            }
            if PATH_OPTIONS.contains(&flag.as_str()) {
                path_follows = true;
                out.push(flag.clone());
                continue;
            }
            // Joined forms: `-Iinclude`, `-isystemthird_party` (never `-include…`).
            let joined = ["-I", "-iquote", "-isystem", "-idirafter"]
                .iter()
                .find_map(|o| flag.strip_prefix(o).map(|value| (o, value)))
                .filter(|(_, value)| !value.is_empty() && !flag.starts_with("-include"));
            match joined {
                Some((option, value)) => out.push(format!(
                    "{option}{}",
                    self.under_src(Path::new(value)).display()
                )),
                None => out.push(flag.clone()),
            }
        }
        out
    }

    /// A relative `path` (relative to the root) as seen from the launch
    /// directory; an absolute one unchanged.
    fn under_src(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            Path::new("src").join(path)
        }
    }
}

impl Drop for LaunchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join("src"));
        let _ = std::fs::remove_file(self.dir.join("out"));
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_the_root_and_the_object_become_relative_and_others_stay() {
        let t = tempfile::tempdir().unwrap();
        let (root, objects) = (t.path().join("proj"), t.path().join("objects"));
        let launch = LaunchDir::new(&root, &objects).unwrap();
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let command = CompileCommand {
            launcher: Some("/usr/bin/distcc".into()),
            compiler: "/usr/bin/c++".into(),
            flags: strings(&[
                "-Iinclude",
                "-I.",
                "-I/abs/inc",
                "-isystem",
                "/venv/torch/include",
                "-isystem",
                "third_party",
                "-include",
                "config.h",
                "-DX=1",
                "-fPIC",
            ]),
            source: "src/ops.cpp".into(),
            output: objects.join(".k.1-0.tmp.o"),
            dir: root.clone(),
            unkeyed_flags: vec![format!("-ffile-prefix-map={}=.", root.display())],
        };
        assert_eq!(
            launch.argv(&command),
            strings(&[
                "/usr/bin/distcc",
                "/usr/bin/c++",
                "-Isrc/include",
                "-Isrc/.",
                "-I/abs/inc",
                "-isystem",
                "/venv/torch/include",
                "-isystem",
                "src/third_party",
                "-include",
                "src/config.h",
                "-DX=1",
                "-fPIC",
                "-ffile-prefix-map=src/=",
                "-c",
                "src/src/ops.cpp",
                "-o",
                "out/.k.1-0.tmp.o",
            ])
        );
        let dir = launch.path().to_path_buf();
        assert_eq!(std::fs::read_link(dir.join("src")).unwrap(), root);
        drop(launch);
        assert!(!dir.exists(), "removed when dropped");
    }
}
