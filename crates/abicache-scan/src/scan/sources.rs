//! The sources' walks after the prefetch. The prefetch resolves each
//! (file, directory found in) pair's includes once and records its children
//! as pair ids in a [`Graph`] (pairs with computed includes are completed
//! once every macro is known); each source is then walked over that graph,
//! ids only: no name, path nor hash is looked at per visit. The first
//! source is walked on the calling thread, which then collects the files'
//! facts, while the others are walked on a second one.

use std::sync::Arc;

use crate::fast_hash::FastMap;
use crate::lexer::IncludeKind;
use crate::report::{ComputedInclude, ScanReport, ScannedFile, SourceReport};
use crate::resolve::{DirId, FileId, Resolution};

use super::{collect_facts, read_entry, resolved_includes, Macros, Slot, Walk};

/// Sources from which [`Walk::sources`] walks some on a second thread.
const PARALLEL_SOURCES_FROM: usize = 2;

/// The include graph of every (file, directory found in) pair the sources
/// reach, as their walks see it: built by the prefetch as it resolves each
/// pair's includes, completed by [`Walk::complete_graph`].
#[derive(Default)]
pub(super) struct Graph {
    /// Pair ids.
    ids: FastMap<(FileId, DirId), u32>,
    /// Indexed by pair id.
    nodes: Vec<Node>,
    /// The children of every pair, each pair's in one run, in include order.
    edges: Vec<u32>,
}

/// One (file, directory) pair of the [`Graph`].
struct Node {
    file: FileId,
    dir: DirId,
    /// Its children's run in [`Graph::edges`], or [`UNRESOLVED`], [`FAILED`].
    children: (u32, u32),
    /// Whether it has computed includes (its run is made again once every
    /// macro is known).
    computed: bool,
    /// Missing and computed includes, for the few pairs that have any.
    extras: Option<Box<Extras>>,
}

/// What a visit of a pair adds to its source's report besides the file.
#[derive(Default)]
pub(super) struct Extras {
    /// `FILE:name` per include that resolved nowhere, in include order
    /// (repeats kept: a source lists each once).
    missing: Vec<String>,
    /// The computed includes that cannot be fully resolved, in order.
    computed: Vec<ComputedInclude>,
}

impl Extras {
    /// Notes that `name`, included by the file shown as `display`, resolved nowhere.
    pub(super) fn missing(&mut self, display: &str, name: &str) {
        self.missing.push(format!("{display}:{name}"));
    }
}

impl Graph {
    /// The id of `pair`, and whether it is new (then its node is added,
    /// its includes not resolved yet).
    pub(super) fn id(&mut self, pair: (FileId, DirId)) -> (u32, bool) {
        let next = self.nodes.len() as u32;
        let id = *self.ids.entry(pair).or_insert(next);
        if id == next {
            self.nodes.push(Node {
                file: pair.0,
                dir: pair.1,
                children: UNRESOLVED,
                computed: false,
                extras: None,
            });
        }
        (id, id == next)
    }

    /// Where the next pair's children start: push them with
    /// [`Graph::child`], then call [`Graph::resolved`].
    pub(super) fn run_start(&self) -> u32 {
        self.edges.len() as u32
    }

    /// Appends a child to the run being made.
    pub(super) fn child(&mut self, id: u32) {
        self.edges.push(id);
    }

    /// Ends the run of pair `id` begun at `start`.
    pub(super) fn resolved(&mut self, id: u32, start: u32, extras: Extras, computed: bool) {
        let has_extras = !extras.missing.is_empty() || !extras.computed.is_empty();
        let node = &mut self.nodes[id as usize];
        node.children = (start, self.edges.len() as u32);
        node.computed = computed;
        node.extras = has_extras.then(|| Box::new(extras));
    }

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

/// The `children` run of a pair whose includes are not resolved yet.
const UNRESOLVED: (u32, u32) = (u32::MAX, u32::MAX - 1);

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
        let roots = self.complete_graph(starts);
        let graph = std::mem::take(&mut self.graph);
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

    /// Completes the prefetch's graph: the pairs with computed includes
    /// are resolved again, now that every macro is known, and any pair not
    /// resolved yet is (its file read if the prefetch did not, which it
    /// does for every pair a walk reaches: a safety net). Returns the pair
    /// id of each source's start.
    fn complete_graph(&mut self, starts: &[(FileId, DirId)]) -> Vec<u32> {
        let roots = starts.iter().map(|&p| self.graph.id(p).0).collect();
        let mut next = 0;
        while next < self.graph.nodes.len() {
            let id = next as u32;
            let node = &self.graph.nodes[next];
            next += 1;
            if node.children != UNRESOLVED && !node.computed {
                continue;
            }
            let (file, dir) = (node.file, node.dir);
            let Some(entry) = self.loaded(file) else {
                self.graph.nodes[id as usize].children = FAILED;
                continue;
            };
            let (display, facts) = (Arc::clone(&entry.display), Arc::clone(&entry.facts));
            let start = self.graph.run_start();
            let mut extras = Extras::default();
            let note =
                |found: Resolution, name: &str, graph: &mut Graph, extras: &mut Extras| match found
                {
                    Resolution::Local { dir, file } => {
                        let child = graph.id((file, dir)).0;
                        graph.child(child);
                    }
                    Resolution::Missing => extras.missing(&display, name),
                    Resolution::System => {}
                };
            for inc in &facts.includes {
                if inc.kind != IncludeKind::Computed {
                    let found = self.resolver.resolve(dir, &inc.name, inc.kind);
                    note(found, &inc.name, &mut self.graph, &mut extras);
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
                    note(found, &target.name, &mut self.graph, &mut extras);
                }
            }
            self.graph.resolved(id, start, extras, false);
        }
        roots
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
