//! Include resolution (SPEC §2), with a cache: big trees resolve the same
//! names from the same directories thousands of times.
//!
//! Order, for `name` included from a file in `dir`:
//! 1. an absolute `name` is used as is when it is a file;
//! 2. `<name>` that is a file under a system root is a system header;
//! 3. then `dir/name`, then `include_path/name` for each extra include path;
//! 4. a quoted `"name"` found nowhere above but under a system root is a
//!    system header (its path never enters a report);
//! 5. a quoted include found nowhere is missing; an angle include found
//!    nowhere is a system header.
//!
//! "Is a file" means `stat` succeeds and says regular file: a dangling
//! symlink or a symlink loop is simply not found.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::lexer::IncludeKind;

/// Where an include led.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// A local file to hash and follow: the path as found (used to resolve
    /// its own includes, as a compiler does) and its canonical path (its
    /// identity).
    Local {
        /// The path the compiler would open.
        found: PathBuf,
        /// The canonical path: the file's identity.
        canonical: PathBuf,
    },
    /// A system header: neither hashed nor followed, never named.
    System,
    /// A quoted include found nowhere (recorded as `FILE:name`).
    Missing,
}

/// Resolves include names against fixed include paths and system roots,
/// remembering every answer.
#[derive(Debug)]
pub struct Resolver {
    include_paths: Vec<PathBuf>,
    system_roots: Vec<PathBuf>,
    /// Per including directory: answers for `[quoted, angle]` names.
    cache: HashMap<PathBuf, [HashMap<String, Resolution>; 2]>,
    system: HashMap<String, bool>,
    via_include_paths: HashMap<String, Option<Resolution>>,
}

impl Resolver {
    /// A resolver for the given extra include paths (in order) and system roots.
    pub fn new(include_paths: Vec<PathBuf>, system_roots: Vec<PathBuf>) -> Self {
        Resolver {
            include_paths,
            system_roots,
            cache: HashMap::new(),
            system: HashMap::new(),
            via_include_paths: HashMap::new(),
        }
    }

    /// Resolves `name` of `kind` included from a file in `dir`. Computed
    /// includes cannot be resolved and are reported as [`Resolution::System`]
    /// (the scan records them separately).
    pub fn resolve(&mut self, dir: &Path, name: &str, kind: IncludeKind) -> Resolution {
        let angle = match kind {
            IncludeKind::Angle => true,
            IncludeKind::Quoted => false,
            IncludeKind::Computed => return Resolution::System,
        };
        let slot = usize::from(angle);
        if let Some(hit) = self.cache.get(dir).and_then(|m| m[slot].get(name)) {
            return hit.clone();
        }
        let answer = self.resolve_uncached(dir, name, angle);
        self.cache.entry(dir.to_path_buf()).or_default()[slot]
            .insert(name.to_owned(), answer.clone());
        answer
    }

    fn resolve_uncached(&mut self, dir: &Path, name: &str, angle: bool) -> Resolution {
        let path = Path::new(name);
        if path.is_absolute() {
            return match local(path.to_path_buf()) {
                Some(found) => found,
                None if angle => Resolution::System,
                None => Resolution::Missing,
            };
        }
        if angle && self.under_system_root(name) {
            return Resolution::System;
        }
        if let Some(found) = local(dir.join(path)) {
            return found;
        }
        if let Some(found) = self.in_include_paths(name) {
            return found;
        }
        if angle || self.under_system_root(name) {
            Resolution::System
        } else {
            Resolution::Missing
        }
    }

    fn in_include_paths(&mut self, name: &str) -> Option<Resolution> {
        if let Some(hit) = self.via_include_paths.get(name) {
            return hit.clone();
        }
        let hit = self
            .include_paths
            .iter()
            .find_map(|base| local(base.join(name)));
        self.via_include_paths.insert(name.to_owned(), hit.clone());
        hit
    }

    fn under_system_root(&mut self, name: &str) -> bool {
        if let Some(&hit) = self.system.get(name) {
            return hit;
        }
        let hit = self.system_roots.iter().any(|r| is_file(&r.join(name)));
        self.system.insert(name.to_owned(), hit);
        hit
    }
}

fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

fn local(found: PathBuf) -> Option<Resolution> {
    if !is_file(&found) {
        return None;
    }
    let canonical = std::fs::canonicalize(&found).ok()?;
    Some(Resolution::Local { found, canonical })
}
