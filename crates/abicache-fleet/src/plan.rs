//! Prebuild plans: what a run asked for (`abicache run --record PLAN`),
//! written so that `abicache prebuild --plan PLAN` builds the same keys on
//! another machine.
//!
//! A plan is a directory (docs/fleet.md, "Record, then prebuild"):
//! - `plan.toml`: `format = 1` and one `[[extension]]` per distinct key the
//!   run loaded (hit or miss), sorted by name then key: the extension's
//!   spec (`[extension.spec]`, the `abicache build` spec format, paths
//!   relative to its fingerprint root), the key it had, the environment
//!   facts of its payload (`python_abi=…`, `torch=…`, …) and every file the
//!   key hashed (`[extension.files]`: path relative to the root → BLAKE3);
//! - `sources/<blake3>`: each of those files once, by content.
//!
//! Recording the same key again changes nothing; processes recording into
//! one plan at once take turns on `plan.toml` (an exclusive `flock` of
//! `PLAN/.lock`, the file replaced by a rename), and a source file is
//! written beside its name and renamed into place, so no entry is lost and
//! no reader sees half a file. Staging ([`stage`]) lays each entry's files
//! out again under a fresh root, where the key's payload (which names files
//! relative to the root) is the recorded one.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use abicache_key::ExtensionSpec;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fleet::FleetExtension;

/// The plan's TOML file inside the plan directory.
pub const PLAN_FILE: &str = "plan.toml";
/// The directory of the plan's files, each named by its BLAKE3.
pub const SOURCES_DIR: &str = "sources";
/// The lock file recorders take turns on.
const LOCK_FILE: &str = ".lock";
/// The plan format this build writes and reads.
pub const PLAN_FORMAT: u32 = 1;

/// Payload fields that restate the spec or its files; every other field is
/// an environment fact ([`PlanEntry::environment`]).
const SPEC_FIELDS: &[&str] = &[
    "format",
    "name",
    "namespace",
    "required_ops",
    "source",
    "file",
    "include_path",
    "cflag",
    "cuda_cflag",
    "ldflag",
    "missing_include",
    "computed_include",
];

/// A whole plan as `plan.toml` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// [`PLAN_FORMAT`].
    pub format: u32,
    /// One per distinct key, sorted by name, then key.
    #[serde(default)]
    pub extension: Vec<PlanEntry>,
}

/// One recorded extension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanEntry {
    /// The extension's name.
    pub name: String,
    /// Its key in the environment that recorded it (another environment,
    /// e.g. a matrix cell, has its own).
    pub key: String,
    /// The payload's environment lines (`python_abi=…`, `torch=…`,
    /// `cxx11_abi=…`, for CUDA `nvcc=…` and the archs): what keyed it
    /// besides the spec and the files.
    pub environment: Vec<String>,
    /// The spec, its sources and include paths relative to the fingerprint
    /// root (absolute only for a path outside it).
    pub spec: ExtensionSpec,
    /// Every file the key hashed: its path as the payload names it
    /// (relative to the root; absolute when outside it) → its BLAKE3.
    pub files: BTreeMap<String, String>,
}

/// What [`record`] did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The plan did not have the key: added.
    Added,
    /// The plan already had the key: nothing changed.
    AlreadyPlanned,
}

/// Records one loaded extension into the plan directory `plan_dir`
/// (created when missing): `spec` as loaded (absolute paths), `root` its
/// fingerprint root, `key` and `payload` (the payload's lines) its key.
/// Copies every file the payload names into `sources/` (checked against the
/// payload's hash: a file changed since it was keyed is refused), then adds
/// the entry under the plan's lock unless its key is already there.
pub fn record(
    plan_dir: &Path,
    spec: &ExtensionSpec,
    root: &Path,
    key: &str,
    payload: &[String],
) -> Result<Recorded> {
    let entry = entry_of(spec, root, key, payload)?;
    let sources = plan_dir.join(SOURCES_DIR);
    fs_err::create_dir_all(&sources).map_err(|e| plan_error(plan_dir, e))?;
    for (path, hash) in &entry.files {
        let file = Path::new(path);
        let from = if file.is_absolute() {
            file.to_path_buf()
        } else {
            root.join(file)
        };
        copy_by_hash(plan_dir, &from, hash)?;
    }
    let _lock = lock(plan_dir)?;
    let mut plan = read_or_new(plan_dir)?;
    if plan.extension.iter().any(|e| e.key == entry.key) {
        return Ok(Recorded::AlreadyPlanned);
    }
    plan.extension.push(entry);
    plan.extension
        .sort_by(|a, b| (&a.name, &a.key).cmp(&(&b.name, &b.key)));
    write_plan(plan_dir, &plan)?;
    Ok(Recorded::Added)
}

/// Reads `PLAN/plan.toml`, refusing another format or a malformed file.
pub fn read(plan_dir: &Path) -> Result<Plan> {
    let path = plan_dir.join(PLAN_FILE);
    let text = fs_err::read_to_string(&path).map_err(|e| Error::Plan {
        path: path.clone(),
        message: format!(
            "{e}; record one with `abicache run --record {}`",
            plan_dir.display()
        ),
    })?;
    let plan: Plan = toml::from_str(&text).map_err(|e| Error::Plan {
        path: path.clone(),
        message: format!("not a prebuild plan: {e}"),
    })?;
    if plan.format != PLAN_FORMAT {
        return Err(Error::Plan {
            path,
            message: format!(
                "plan format {} is not {PLAN_FORMAT}, the one this abicache reads; record it \
                 again with this abicache",
                plan.format
            ),
        });
    }
    Ok(plan)
}

/// Lays every entry of the plan `plan_dir` out under `into` (one directory
/// per key, its files at the paths the payload named them by, copied from
/// `sources/` and checked against their hash) and returns them as fleet
/// extensions whose root is that directory, so that each one's key in the
/// recording environment is the recorded key. A file outside the recorded
/// root (an absolute path in the plan) must exist here with the same
/// content.
pub fn stage(plan_dir: &Path, into: &Path) -> Result<Vec<FleetExtension>> {
    let plan = read(plan_dir)?;
    let mut staged = Vec::with_capacity(plan.extension.len());
    for entry in plan.extension {
        if !is_key(&entry.key) {
            return Err(Error::Plan {
                path: plan_dir.join(PLAN_FILE),
                message: format!(
                    "`{}` has the key `{}`, which is not 32 hex digits",
                    entry.name, entry.key
                ),
            });
        }
        let root = into.join(&entry.key);
        fs_err::create_dir_all(&root).map_err(|e| plan_error(plan_dir, e))?;
        let root = fs_err::canonicalize(&root).map_err(|e| plan_error(plan_dir, e))?;
        for (path, hash) in &entry.files {
            let file = Path::new(path);
            if file.is_absolute() {
                check_outside_file(plan_dir, &entry.name, file, hash)?;
                continue;
            }
            let to = root.join(relative_inside(plan_dir, &entry.name, path)?);
            if let Some(parent) = to.parent() {
                fs_err::create_dir_all(parent).map_err(|e| plan_error(plan_dir, e))?;
            }
            let bytes = read_source(plan_dir, hash)?;
            fs_err::write(&to, bytes).map_err(|e| plan_error(plan_dir, e))?;
        }
        let mut spec = entry.spec;
        for dir in &spec.extra_include_paths {
            if dir.is_relative() {
                fs_err::create_dir_all(root.join(dir)).map_err(|e| plan_error(plan_dir, e))?;
            }
        }
        for p in spec
            .sources
            .iter_mut()
            .chain(spec.extra_include_paths.iter_mut())
        {
            if p.is_relative() {
                *p = root.join(&*p);
            }
        }
        staged.push(FleetExtension { spec, root });
    }
    Ok(staged)
}

/// The plan entry of a load: the spec made relative to `root`, the
/// payload's files and environment lines.
fn entry_of(spec: &ExtensionSpec, root: &Path, key: &str, payload: &[String]) -> Result<PlanEntry> {
    let mut files = BTreeMap::new();
    let mut sources = Vec::new();
    let mut environment = Vec::new();
    for line in payload {
        let (field, value) = line.split_once('=').unwrap_or((line.as_str(), ""));
        match field {
            "file" => {
                let (hash, path) = value.split_once(' ').ok_or_else(|| Error::Plan {
                    path: root.to_path_buf(),
                    message: format!("the payload line `{line}` is not `file=<blake3> <path>`"),
                })?;
                if path.contains('\\') {
                    return Err(Error::Plan {
                        path: PathBuf::from(path),
                        message: format!(
                            "`{}` reaches a file whose name needs escaping in the payload; \
                             a plan cannot name it (rename it)",
                            spec.name
                        ),
                    });
                }
                files.insert(path.to_owned(), hash.to_owned());
            }
            "source" => sources.push(PathBuf::from(value)),
            f if SPEC_FIELDS.contains(&f) => {}
            _ => environment.push(line.clone()),
        }
    }
    let mut relative = spec.clone();
    if sources.len() == spec.sources.len() {
        relative.sources = sources;
    } else {
        relative.sources = spec.sources.iter().map(|p| relative_to(p, root)).collect();
    }
    relative.extra_include_paths = spec
        .extra_include_paths
        .iter()
        .map(|p| relative_to(p, root))
        .collect();
    Ok(PlanEntry {
        name: spec.name.clone(),
        key: key.to_owned(),
        environment,
        spec: relative,
        files,
    })
}

/// `path` relative to `root` when under it (also through the canonical
/// forms of both), else as it is.
fn relative_to(path: &Path, root: &Path) -> PathBuf {
    if let Ok(rel) = path.strip_prefix(root) {
        return rel.to_path_buf();
    }
    match (path.canonicalize(), root.canonicalize()) {
        (Ok(p), Ok(r)) => p
            .strip_prefix(&r)
            .map(Path::to_path_buf)
            .unwrap_or(p.clone()),
        _ => path.to_path_buf(),
    }
}

/// `path` (a plan's relative file name) when it stays inside the root: no
/// `..`, no empty or `.` component.
fn relative_inside<'a>(plan_dir: &Path, name: &str, path: &'a str) -> Result<&'a str> {
    if path
        .split('/')
        .all(|c| !c.is_empty() && c != "." && c != "..")
    {
        Ok(path)
    } else {
        Err(Error::Plan {
            path: plan_dir.join(PLAN_FILE),
            message: format!("`{name}` names the file `{path}`, which leaves its root"),
        })
    }
}

/// Copies `from` into `PLAN/sources/<hash>` unless it is there, checking
/// that its content still hashes to `hash`.
fn copy_by_hash(plan_dir: &Path, from: &Path, hash: &str) -> Result<()> {
    if !is_hash(hash) {
        return Err(Error::Plan {
            path: from.to_path_buf(),
            message: format!("the payload's hash `{hash}` is not 64 hex digits"),
        });
    }
    let to = plan_dir.join(SOURCES_DIR).join(hash);
    if to.is_file() {
        return Ok(());
    }
    let bytes = fs_err::read(from).map_err(|e| plan_error(plan_dir, e))?;
    if blake3::hash(&bytes).to_hex().as_str() != hash {
        return Err(Error::Plan {
            path: from.to_path_buf(),
            message: "the file changed after the extension was keyed; run the program again"
                .to_owned(),
        });
    }
    let mut tmp = tempfile::NamedTempFile::new_in(plan_dir.join(SOURCES_DIR))
        .map_err(|e| plan_error(plan_dir, e))?;
    tmp.write_all(&bytes).map_err(|e| plan_error(plan_dir, e))?;
    tmp.persist(&to)
        .map_err(|e| plan_error(plan_dir, e.error))?;
    Ok(())
}

/// The content of `PLAN/sources/<hash>`, checked against the hash.
fn read_source(plan_dir: &Path, hash: &str) -> Result<Vec<u8>> {
    let path = plan_dir.join(SOURCES_DIR).join(hash);
    if !is_hash(hash) {
        return Err(Error::Plan {
            path,
            message: format!("`{hash}` is not a BLAKE3 hash (64 hex digits)"),
        });
    }
    let bytes = fs_err::read(&path).map_err(|e| plan_error(plan_dir, e))?;
    if blake3::hash(&bytes).to_hex().as_str() != hash {
        return Err(Error::Plan {
            path,
            message: "the file's content does not match its name (its BLAKE3); the plan was \
                      edited or damaged: record it again"
                .to_owned(),
        });
    }
    Ok(bytes)
}

/// A file outside the recorded root must be here, unchanged.
fn check_outside_file(plan_dir: &Path, name: &str, file: &Path, hash: &str) -> Result<()> {
    let same = fs_err::read(file)
        .map(|bytes| blake3::hash(&bytes).to_hex().as_str() == hash)
        .unwrap_or(false);
    if same {
        return Ok(());
    }
    Err(Error::Plan {
        path: plan_dir.join(PLAN_FILE),
        message: format!(
            "`{name}` was keyed on `{}`, outside its fingerprint root, which is missing here or \
             has other content; install the same file, or record the plan with that file inside \
             the project",
            file.display()
        ),
    })
}

/// Holds an exclusive `flock` of `PLAN/.lock` while alive.
fn lock(plan_dir: &Path) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(plan_dir.join(LOCK_FILE))
        .map_err(|e| plan_error(plan_dir, e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| plan_error(plan_dir, e.into()))?;
    Ok(file)
}

fn read_or_new(plan_dir: &Path) -> Result<Plan> {
    if plan_dir.join(PLAN_FILE).exists() {
        read(plan_dir)
    } else {
        Ok(Plan {
            format: PLAN_FORMAT,
            extension: Vec::new(),
        })
    }
}

/// Writes `plan.toml` beside itself and renames it into place. Empty lists
/// and unset options are left out, so the file holds only what was given.
fn write_plan(plan_dir: &Path, plan: &Plan) -> Result<()> {
    let mut value = toml::Value::try_from(plan).map_err(|e| Error::Plan {
        path: plan_dir.join(PLAN_FILE),
        message: format!("cannot write the plan: {e}"),
    })?;
    if let Some(entries) = value.get_mut("extension").and_then(|v| v.as_array_mut()) {
        for entry in entries {
            if let Some(spec) = entry.get_mut("spec").and_then(|v| v.as_table_mut()) {
                spec.retain(|_, v| !matches!(v, toml::Value::Array(a) if a.is_empty()));
            }
        }
    }
    let text = format!(
        "# A prebuild plan written by `abicache run --record`: build it with\n\
         # `abicache prebuild --plan DIR` (docs/fleet.md, \"Record, then prebuild\").\n{}",
        toml::to_string(&value).map_err(|e| Error::Plan {
            path: plan_dir.join(PLAN_FILE),
            message: format!("cannot write the plan: {e}"),
        })?
    );
    let mut tmp = tempfile::NamedTempFile::new_in(plan_dir).map_err(|e| plan_error(plan_dir, e))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| plan_error(plan_dir, e))?;
    tmp.persist(plan_dir.join(PLAN_FILE))
        .map_err(|e| plan_error(plan_dir, e.error))?;
    Ok(())
}

fn plan_error(plan_dir: &Path, e: std::io::Error) -> Error {
    Error::Plan {
        path: plan_dir.to_path_buf(),
        message: e.to_string(),
    }
}

fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_key(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn a_recorded_entry_is_relative_stored_by_content_once_and_stages_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("proj");
        fs_err::create_dir_all(root.join("src")).unwrap();
        fs_err::create_dir_all(root.join("inc")).unwrap();
        fs_err::write(root.join("src/a.cpp"), "int a();\n").unwrap();
        fs_err::write(root.join("inc/h.h"), "int h();\n").unwrap();
        let hash = |p: &str| {
            blake3::hash(&fs_err::read(root.join(p)).unwrap())
                .to_hex()
                .to_string()
        };
        let spec = ExtensionSpec::new("a", [root.join("src/a.cpp")]).with_extra_cflags(["-O2"]);
        let mut spec = spec;
        spec.extra_include_paths = vec![root.join("inc")];
        let lines = payload(&[
            "format=1",
            "name=a",
            "python_abi=agnostic",
            "torch=2.15.0",
            "cflag=-O2",
            "source=src/a.cpp",
            &format!("file={} src/a.cpp", hash("src/a.cpp")),
            &format!("file={} inc/h.h", hash("inc/h.h")),
            "include_path=inc",
        ]);
        let plan_dir = tmp.path().join("plan");
        let key = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            record(&plan_dir, &spec, &root, key, &lines).unwrap(),
            Recorded::Added
        );
        assert_eq!(
            record(&plan_dir, &spec, &root, key, &lines).unwrap(),
            Recorded::AlreadyPlanned
        );
        let plan = read(&plan_dir).unwrap();
        assert_eq!(plan.extension.len(), 1);
        let entry = &plan.extension[0];
        assert_eq!(entry.environment, ["python_abi=agnostic", "torch=2.15.0"]);
        assert_eq!(entry.spec.sources, [PathBuf::from("src/a.cpp")]);
        assert_eq!(entry.spec.extra_include_paths, [PathBuf::from("inc")]);
        let text = fs_err::read_to_string(plan_dir.join(PLAN_FILE)).unwrap();
        assert!(!text.contains(&*tmp.path().to_string_lossy()), "{text}");
        assert_eq!(
            fs_err::read_dir(plan_dir.join(SOURCES_DIR))
                .unwrap()
                .count(),
            2
        );

        let staged = stage(&plan_dir, &tmp.path().join("stage")).unwrap();
        assert_eq!(staged.len(), 1);
        let root2 = &staged[0].root;
        assert_eq!(
            fs_err::read_to_string(root2.join("inc/h.h")).unwrap(),
            "int h();\n"
        );
        assert_eq!(staged[0].spec.sources, [root2.join("src/a.cpp")]);
        assert_eq!(staged[0].spec.extra_cflags, ["-O2"]);
    }

    #[test]
    fn a_damaged_source_and_a_file_changed_before_recording_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs_err::write(tmp.path().join("a.cpp"), "int a();\n").unwrap();
        let spec = ExtensionSpec::new("a", [tmp.path().join("a.cpp")]);
        let wrong = "0".repeat(64);
        let err = record(
            &tmp.path().join("plan"),
            &spec,
            tmp.path(),
            &"1".repeat(32),
            &payload(&["source=a.cpp", &format!("file={wrong} a.cpp")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("changed after the extension was keyed"),
            "{err}"
        );

        let good = blake3::hash(b"int a();\n").to_hex().to_string();
        let plan_dir = tmp.path().join("plan");
        record(
            &plan_dir,
            &spec,
            tmp.path(),
            &"1".repeat(32),
            &payload(&["source=a.cpp", &format!("file={good} a.cpp")]),
        )
        .unwrap();
        fs_err::write(plan_dir.join(SOURCES_DIR).join(&good), "edited").unwrap();
        let err = stage(&plan_dir, &tmp.path().join("stage")).unwrap_err();
        assert!(err.to_string().contains("does not match its name"), "{err}");
    }

    #[test]
    fn threads_recording_into_one_plan_at_once_keep_every_entry() {
        let tmp = tempfile::tempdir().unwrap();
        fs_err::write(tmp.path().join("a.cpp"), "int a();\n").unwrap();
        let hash = blake3::hash(b"int a();\n").to_hex().to_string();
        let plan_dir = tmp.path().join("plan");
        std::thread::scope(|s| {
            for i in 0..8 {
                let (plan_dir, hash, root) = (&plan_dir, &hash, tmp.path());
                s.spawn(move || {
                    let spec = ExtensionSpec::new(format!("e{i}"), [root.join("a.cpp")]);
                    let lines = payload(&["source=a.cpp", &format!("file={hash} a.cpp")]);
                    record(plan_dir, &spec, root, &format!("{i:032x}"), &lines).unwrap();
                });
            }
        });
        let plan = read(&plan_dir).unwrap();
        let names: Vec<&str> = plan.extension.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"]);
    }
}
