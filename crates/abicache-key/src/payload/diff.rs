//! What differs between two payloads, field by field, for `abicache explain`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;

use super::format::Payload;

/// Repeated fields compared as whole lists.
const LIST_FIELDS: &[&str] = &["cflag", "cuda_cflag", "include_path", "ldflag"];

impl Payload {
    /// What changed from `self` (old) to `other` (new), field by field:
    /// scalar fields old → new, sources added or removed, files added,
    /// removed or changed per source, and list fields (flags, include paths)
    /// whose items differ. Empty when the payloads are equal.
    pub fn diff(&self, other: &Payload) -> Vec<FieldChange> {
        let (a, b) = (Sections::of(self), Sections::of(other));
        let mut out = Vec::new();
        let mut fields: Vec<&String> = a.scalars.iter().map(|(f, _)| f).collect();
        fields.extend(
            b.scalars
                .iter()
                .map(|(f, _)| f)
                .filter(|f| a.scalar(f).is_none()),
        );
        for f in fields {
            match (a.scalar(f), b.scalar(f)) {
                (Some(o), Some(n)) if o != n => out.push(FieldChange::Changed {
                    field: f.clone(),
                    old: o.into(),
                    new: n.into(),
                }),
                (Some(o), None) => out.push(FieldChange::Removed {
                    field: f.clone(),
                    value: o.into(),
                }),
                (None, Some(n)) => out.push(FieldChange::Added {
                    field: f.clone(),
                    value: n.into(),
                }),
                _ => {}
            }
        }
        for s in &a.sources {
            if !b.sources.iter().any(|t| t.name == s.name) {
                out.push(FieldChange::SourceRemoved {
                    source: s.name.clone(),
                });
            }
        }
        for s in &b.sources {
            match a.sources.iter().find(|t| t.name == s.name) {
                None => out.push(FieldChange::SourceAdded {
                    source: s.name.clone(),
                }),
                Some(old) => old.diff(s, &mut out),
            }
        }
        let names = |x: &Sections| x.sources.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        if a.sources.len() == b.sources.len()
            && names(&a) != names(&b)
            && a.sources
                .iter()
                .all(|s| b.sources.iter().any(|t| t.name == s.name))
        {
            out.push(FieldChange::Reordered {
                what: "sources".into(),
            });
        }
        for field in LIST_FIELDS {
            let (o, n) = (a.list(field), b.list(field));
            if o != n {
                out.push(FieldChange::ListChanged {
                    field: field.to_string(),
                    old: o,
                    new: n,
                });
            }
        }
        out
    }
}

/// One difference between two payloads, for `abicache explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FieldChange {
    /// A single-valued field changed.
    Changed {
        /// Field name, e.g. `torch`.
        field: String,
        /// Old value.
        old: String,
        /// New value.
        new: String,
    },
    /// A field only the new payload has (e.g. `torch_abi` replacing `torch`).
    Added {
        /// Field name (or `missing_include` / `computed_include`).
        field: String,
        /// Its value.
        value: String,
    },
    /// A field only the old payload has.
    Removed {
        /// Field name (or `missing_include` / `computed_include`).
        field: String,
        /// Its value.
        value: String,
    },
    /// A source only the new payload has.
    SourceAdded {
        /// Its display path.
        source: String,
    },
    /// A source only the old payload has.
    SourceRemoved {
        /// Its display path.
        source: String,
    },
    /// A file's content changed.
    FileChanged {
        /// The source that reaches it.
        source: String,
        /// The file's display path.
        file: String,
        /// Old BLAKE3.
        old: String,
        /// New BLAKE3.
        new: String,
    },
    /// A source now reaches a file it did not.
    FileAdded {
        /// The source.
        source: String,
        /// The file's display path.
        file: String,
    },
    /// A source no longer reaches a file.
    FileRemoved {
        /// The source.
        source: String,
        /// The file's display path.
        file: String,
    },
    /// Same items, different order (sources, or a source's files).
    Reordered {
        /// `sources` or `files of SOURCE`.
        what: String,
    },
    /// A repeated field (`cflag`, `cuda_cflag`, `include_path`, `ldflag`) differs.
    ListChanged {
        /// Field name.
        field: String,
        /// Old items in order.
        old: Vec<String>,
        /// New items in order.
        new: Vec<String>,
    },
}

impl fmt::Display for FieldChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Two resolved CPUs share most of their options: show those that differ.
            Self::Changed { field, old, new } if field == "host_cpu" => {
                let (o, n): (Vec<&str>, Vec<&str>) =
                    (old.split(' ').collect(), new.split(' ').collect());
                let only = |a: &[&str], b: &[&str]| {
                    a.iter()
                        .filter(|x| !b.contains(x))
                        .copied()
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                write!(
                    f,
                    "host_cpu (the CPU `-march=native` resolved to): {} -> {}",
                    only(&o, &n),
                    only(&n, &o)
                )
            }
            Self::Changed { field, old, new } => write!(f, "{field}: {old} -> {new}"),
            Self::Added { field, value } => write!(f, "{field}: added {value}"),
            Self::Removed { field, value } => write!(f, "{field}: removed {value}"),
            Self::SourceAdded { source } => write!(f, "source added: {source}"),
            Self::SourceRemoved { source } => write!(f, "source removed: {source}"),
            Self::FileChanged {
                source,
                file,
                old,
                new,
            } => {
                let short = |h: &str| h.chars().take(12).collect::<String>();
                write!(
                    f,
                    "file changed: {file} (via {source}) {} -> {}",
                    short(old),
                    short(new)
                )
            }
            Self::FileAdded { source, file } => write!(f, "file added: {file} (via {source})"),
            Self::FileRemoved { source, file } => write!(f, "file removed: {file} (via {source})"),
            Self::Reordered { what } => write!(f, "reordered: {what}"),
            Self::ListChanged { field, old, new } => {
                write!(f, "{field}: [{}] -> [{}]", old.join(" "), new.join(" "))
            }
        }
    }
}

struct SourceSection {
    name: String,
    files: Vec<(String, String)>,
    extras: Vec<(String, String)>,
}

impl SourceSection {
    fn diff(&self, new: &SourceSection, out: &mut Vec<FieldChange>) {
        let old_files: HashMap<&str, &str> = self
            .files
            .iter()
            .map(|(p, h)| (p.as_str(), h.as_str()))
            .collect();
        let new_files: HashMap<&str, &str> = new
            .files
            .iter()
            .map(|(p, h)| (p.as_str(), h.as_str()))
            .collect();
        for (p, _) in &self.files {
            if !new_files.contains_key(p.as_str()) {
                out.push(FieldChange::FileRemoved {
                    source: self.name.clone(),
                    file: p.clone(),
                });
            }
        }
        for (p, h) in &new.files {
            match old_files.get(p.as_str()) {
                None => out.push(FieldChange::FileAdded {
                    source: self.name.clone(),
                    file: p.clone(),
                }),
                Some(o) if o != h => out.push(FieldChange::FileChanged {
                    source: self.name.clone(),
                    file: p.clone(),
                    old: o.to_string(),
                    new: h.clone(),
                }),
                Some(_) => {}
            }
        }
        let order = |s: &SourceSection| s.files.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        if old_files.len() == new_files.len()
            && old_files.keys().all(|k| new_files.contains_key(k))
            && order(self) != order(new)
        {
            out.push(FieldChange::Reordered {
                what: format!("files of {}", self.name),
            });
        }
        for e in &self.extras {
            if !new.extras.contains(e) {
                out.push(FieldChange::Removed {
                    field: e.0.clone(),
                    value: e.1.clone(),
                });
            }
        }
        for e in &new.extras {
            if !self.extras.contains(e) {
                out.push(FieldChange::Added {
                    field: e.0.clone(),
                    value: e.1.clone(),
                });
            }
        }
    }
}

struct Sections {
    scalars: Vec<(String, String)>,
    sources: Vec<SourceSection>,
    lists: BTreeMap<String, Vec<String>>,
}

impl Sections {
    fn of(p: &Payload) -> Self {
        let mut s = Sections {
            scalars: Vec::new(),
            sources: Vec::new(),
            lists: BTreeMap::new(),
        };
        for (f, v) in p.entries() {
            match f {
                "source" => s.sources.push(SourceSection {
                    name: v.to_string(),
                    files: Vec::new(),
                    extras: Vec::new(),
                }),
                "file" if !s.sources.is_empty() => {
                    let (hash, path) = v.split_once(' ').unwrap_or((v, ""));
                    let last = s.sources.last_mut().expect("checked non-empty");
                    last.files.push((path.to_string(), hash.to_string()));
                }
                "missing_include" | "computed_include" if !s.sources.is_empty() => {
                    let last = s.sources.last_mut().expect("checked non-empty");
                    last.extras.push((f.to_string(), v.to_string()));
                }
                f if LIST_FIELDS.contains(&f) => s
                    .lists
                    .entry(f.to_string())
                    .or_default()
                    .push(v.to_string()),
                _ => s.scalars.push((f.to_string(), v.to_string())),
            }
        }
        s
    }
    fn scalar(&self, f: &str) -> Option<&str> {
        self.scalars
            .iter()
            .find(|(k, _)| k == f)
            .map(|(_, v)| v.as_str())
    }
    fn list(&self, f: &str) -> Vec<String> {
        self.lists.get(f).cloned().unwrap_or_default()
    }
}
