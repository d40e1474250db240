//! The sources' walks after the prefetch: every include is resolved once
//! per (file, directory) pair into a compact graph of pair ids, then each
//! source is walked over that graph (ids only: no name, path nor hash is
//! looked at per visit), the sources on two threads.

use std::sync::Arc;

use crate::fast_hash::FastMap;
use crate::lexer::IncludeKind;
use crate::report::{ComputedInclude, ScanReport, ScannedFile, SourceReport};
use crate::resolve::{DirId, FileId, Resolution};

use super::{collect_facts, read_entry, resolved_includes, Macros, Slot, Walk};

/// Sources from which [`Walk::sources`] walks some on a second thread.
const PARALLEL_SOURCES_FROM: usize = 2;

/// The include graph of every (file, directory found in) pair the sources
/// reach, as their walks see it.
struct Graph {
    /// Indexed by pair id.
    nodes: Vec<Node>,
    /// The children of every pair, each pair's in one run, in include order.
    edges: Vec<u32>,
}

/// One (file, directory) pair of the [`Graph`].
struct Node {
    file: FileId,
    /// Its children's run in [`Graph::edges`].
    children: (u32, u32),
    /// Missing and computed includes, for the few pairs that have any.
    extras: Option<Box<Extras>>,
}

/// What a visit of a pair adds to its source's report besides the file.
#[derive(Default)]
struct Extras {
    /// `FILE:name` per include that resolved nowhere, in include order
    /// (repeats kept: a source lists each once).
    missing: Vec<String>,
    /// The computed includes that cannot be fully resolved, in order.
    computed: Vec<ComputedInclude>,
}

impl Graph {
    fn children(&self, node: u32) -> &[u32] {
        let (start, end) = self.nodes[node as usize].children;
        &self.edges[start as usize..end as usize]
    }

    /// The pairs a source starting at `start` visits, in its walk's order
    /// (depth-first, preorder, children in include order, each file once),
    /// or the first unreadable file the walk meets. `visited` is indexed
    /// by file: entries equal to `mark` count as visited; `mark` must
    /// differ from every entry on entry.
    fn order(&self, start: u32, visited: &mut [u32], mark: u32) -> Result<Vec<u32>, FileId> {
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            let file = self.nodes[node as usize].file;
            let seen = &mut visited[file.index()];
            if *seen == mark {
                continue;
            }
            // Only a loaded file has a node with children; a failed one
            // ends the walk (its error is the source's).
            if self.nodes[node as usize].children == FAILED {
                return Err(file);
            }
            *seen = mark;
            order.push(node);
            let children = self.children(node);
            stack.extend(
                children
                    .iter()
                    .rev()
                    .filter(|&&c| visited[self.nodes[c as usize].file.index()] != mark),
            );
        }
        Ok(order)
    }
}

/// The `children` run of a pair whose file could not be read.
const FAILED: (u32, u32) = (u32::MAX, u32::MAX);

/// One source's walk: its pairs in visit order and its report, or the
/// unreadable file that ended it.
type Walked = Result<(Vec<u32>, SourceReport), FileId>;

impl Walk<'_> {
    /// Walks each source of `starts` (after [`Walk::prefetch`]) and returns
    /// their reports, in order; facts are collected once per file, in the
    /// order of the files' first visits (as walking the sources one after
    /// the other would). The first source is walked here, its facts
    /// collected meanwhile; the others on a second thread.
    ///
    /// # Errors
    /// The first file, in the order of the walks, that cannot be read.
    pub(super) fn sources(
        &mut self,
        starts: &[(FileId, DirId)],
    ) -> Result<Vec<SourceReport>, FileId> {
        let (graph, roots) = self.graph(starts);
        let Some((&first, rest)) = roots.split_first() else {
            return Ok(Vec::new());
        };
        let Walk {
            files,
            macros,
            report,
            ..
        } = self;
        let files: &[Slot] = files;
        let mut collected = vec![false; files.len()];
        let (graph, collected_ref) = (&graph, &mut collected);
        let mut here = move || -> Walked {
            let order = graph.order(first, &mut vec![0; files.len()], 1)?;
            let out = report_of(graph, files, &order);
            collect_first(graph, &order, collected_ref, macros, files, report);
            Ok((order, out))
        };
        let beside = move || walk_all(graph, files, rest);
        let (others, first) = if rest.len() + 1 >= PARALLEL_SOURCES_FROM {
            crate::join::join(beside, here)
        } else {
            let first = here();
            (beside(), first)
        };
        let mut reports = Vec::with_capacity(roots.len());
        reports.push(first?.1);
        for walked in others {
            let (order, out) = walked?;
            let Walk { macros, report, .. } = self;
            collect_first(graph, &order, &mut collected, macros, &self.files, report);
            reports.push(out);
        }
        Ok(reports)
    }

    /// The graph of every pair reachable from `starts`, and the start's
    /// pair id of each source. Resolves each pair's includes as a walk
    /// visiting it would: from what the prefetch resolved when it did, the
    /// computed ones with the macros of every file read.
    fn graph(&mut self, starts: &[(FileId, DirId)]) -> (Graph, Vec<u32>) {
        let mut ids: FastMap<(FileId, DirId), u32> = FastMap::default();
        let mut pairs: Vec<(FileId, DirId)> = Vec::new();
        let mut id_of = |pair: (FileId, DirId), pairs: &mut Vec<(FileId, DirId)>| -> u32 {
            *ids.entry(pair).or_insert_with(|| {
                pairs.push(pair);
                (pairs.len() - 1) as u32
            })
        };
        let roots: Vec<u32> = starts.iter().map(|&p| id_of(p, &mut pairs)).collect();
        let mut graph = Graph {
            nodes: Vec::new(),
            edges: Vec::new(),
        };
        let mut known = Vec::new();
        let mut next = 0;
        while next < pairs.len() {
            let (file, dir) = pairs[next];
            next += 1;
            let Some(entry) = self.loaded(file) else {
                graph.nodes.push(Node {
                    file,
                    children: FAILED,
                    extras: None,
                });
                continue;
            };
            let (display, facts) = (Arc::clone(&entry.display), Arc::clone(&entry.facts));
            let start = graph.edges.len() as u32;
            let mut extras = Extras::default();
            let mut note = |found: Resolution,
                            name: &str,
                            graph: &mut Graph,
                            pairs: &mut Vec<(FileId, DirId)>,
                            extras: &mut Extras| match found {
                Resolution::Local { dir, file } => graph.edges.push(id_of((file, dir), pairs)),
                Resolution::Missing => extras.missing.push(format!("{display}:{name}")),
                Resolution::System => {}
            };
            known.clear();
            if let Some(r) = self.resolved(file, dir) {
                known.extend_from_slice(r);
            }
            let reuse = known.len() == facts.includes.len();
            for (n, inc) in facts.includes.iter().enumerate() {
                if inc.kind != IncludeKind::Computed {
                    let found = match known.get(n) {
                        Some(&found) if reuse => found,
                        _ => self.resolver.resolve(dir, &inc.name, inc.kind),
                    };
                    note(found, &inc.name, &mut graph, &mut pairs, &mut extras);
                    continue;
                }
                let expansion = self.expansion(&inc.name);
                if expansion.unresolved.is_some() {
                    extras.computed.push(ComputedInclude {
                        file: display.to_string(),
                        line: inc.line,
                        text: inc.name.clone(),
                    });
                }
                for target in &resolved_includes(inc, &expansion) {
                    let found = self.resolver.resolve(dir, &target.name, target.kind);
                    note(found, &target.name, &mut graph, &mut pairs, &mut extras);
                }
            }
            let has_extras = !extras.missing.is_empty() || !extras.computed.is_empty();
            graph.nodes.push(Node {
                file,
                children: (start, graph.edges.len() as u32),
                extras: has_extras.then(|| Box::new(extras)),
            });
        }
        (graph, roots)
    }

    /// The entry of `file`, read now if the prefetch did not (it reads
    /// every file a walk reaches, so this is a safety net); `None` when it
    /// cannot be read (the error stays in its slot).
    fn loaded(&mut self, file: FileId) -> Option<&super::FileEntry> {
        let k = file.index();
        if matches!(self.slot(file), Slot::Empty) {
            let path = self.resolver.file_path(file);
            self.files[k] = read_entry(&self.root, path, self.cache, &mut self.buf);
            self.macros.stale = true;
        }
        match &self.files[k] {
            Slot::Ready(entry) => Some(entry),
            _ => None,
        }
    }
}

/// The report of a source whose walk visited `order`.
fn report_of(graph: &Graph, files: &[Slot], order: &[u32]) -> SourceReport {
    let mut out = SourceReport {
        source: String::new(),
        files: Vec::with_capacity(order.len()),
        missing_includes: Vec::new(),
        computed_includes: Vec::new(),
        uses_extension_name: false,
    };
    for &node in order {
        let node = &graph.nodes[node as usize];
        let Slot::Ready(entry) = &files[node.file.index()] else {
            unreachable!("a visited file is loaded");
        };
        out.files.push(ScannedFile {
            path: Arc::clone(&entry.display),
            blake3: Arc::clone(&entry.blake3),
        });
        out.uses_extension_name |= entry.facts.uses_extension_name;
        if let Some(extras) = &node.extras {
            for m in &extras.missing {
                if !out.missing_includes.contains(m) {
                    out.missing_includes.push(m.clone());
                }
            }
            out.computed_includes
                .extend(extras.computed.iter().cloned());
        }
    }
    if let Some(first) = out.files.first() {
        out.source = first.path.to_string();
    }
    out
}

/// The walks (visit order and report) of the sources starting at `roots`, in order.
fn walk_all(graph: &Graph, files: &[Slot], roots: &[u32]) -> Vec<Walked> {
    let mut visited = vec![0u32; files.len()];
    (1u32..)
        .zip(roots)
        .map(|(mark, &root)| {
            let order = graph.order(root, &mut visited, mark)?;
            let out = report_of(graph, files, &order);
            Ok((order, out))
        })
        .collect()
}

/// Collects the facts of each file of `order` not `collected` yet, in
/// order, into `report`.
fn collect_first(
    graph: &Graph,
    order: &[u32],
    collected: &mut [bool],
    macros: &mut Macros,
    files: &[Slot],
    report: &mut ScanReport,
) {
    for &node in order {
        let file = graph.nodes[node as usize].file;
        if std::mem::replace(&mut collected[file.index()], true) {
            continue;
        }
        let Slot::Ready(entry) = &files[file.index()] else {
            unreachable!("a visited file is loaded");
        };
        collect_facts(macros, files, report, &entry.display, &entry.facts);
    }
}
