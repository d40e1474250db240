//! `scan` on real trees in temporary directories: resolution (docs/key.md, step 1),
//! traversal, identity and errors.

use std::fs;
use std::path::{Path, PathBuf};

use abicache_scan::{render_summary, scan, ScanConfig, ScanError, ScanReport};
use tempfile::TempDir;

/// Writes `files` (relative path, content) under a fresh temp dir.
fn tree(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), files);
    dir
}

fn write_all(base: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let path = base.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
}

fn scan_one(root: &Path, source: &str, config: ScanConfig) -> ScanReport {
    scan(&[root.join(source)], &config).unwrap()
}

fn files(report: &ScanReport) -> Vec<&str> {
    report.sources[0].files.iter().map(|f| &*f.path).collect()
}

// ---- resolution (docs/key.md, step 1) --------------------------------------------------

#[test]
fn angle_include_under_including_dir_is_followed_and_hashed() {
    let t = tree(&[
        ("src/a.cpp", "#include <local.h>\n"),
        ("src/local.h", "PyObject* o;\n"),
    ]);
    let r = scan_one(t.path(), "src/a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["src/a.cpp", "src/local.h"]);
    assert_eq!(r.python_markers[0].file, "src/local.h");
}

#[test]
fn includes_resolve_via_extra_include_paths_in_order() {
    let t = tree(&[
        ("src/a.cpp", "#include <lib/x.h>\n#include \"y.h\"\n"),
        ("first/lib/x.h", "// first\n"),
        ("second/lib/x.h", "// second\n"),
        ("second/y.h", "// only in second\n"),
    ]);
    let config = ScanConfig::new(t.path())
        .include_path(t.path().join("first"))
        .include_path(t.path().join("second"));
    let r = scan_one(t.path(), "src/a.cpp", config);
    assert_eq!(files(&r), ["src/a.cpp", "first/lib/x.h", "second/y.h"]);
}

#[test]
fn including_dir_is_tried_before_include_paths() {
    let t = tree(&[
        ("src/a.cpp", "#include \"x.h\"\n"),
        ("src/x.h", ""),
        ("inc/x.h", ""),
    ]);
    let config = ScanConfig::new(t.path()).include_path(t.path().join("inc"));
    let r = scan_one(t.path(), "src/a.cpp", config);
    assert_eq!(files(&r), ["src/a.cpp", "src/x.h"]);
}

#[test]
fn headers_resolve_relative_to_the_including_header_not_the_source() {
    let t = tree(&[
        ("src/a.cpp", "#include \"../lib/x.h\"\n"),
        ("lib/x.h", "#include \"y.h\"\n"),
        ("lib/y.h", ""),
    ]);
    let r = scan_one(t.path(), "src/a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["src/a.cpp", "lib/x.h", "lib/y.h"]);
}

#[test]
fn angle_include_under_system_root_is_skipped_even_when_local_copy_exists() {
    let t = tree(&[
        ("src/a.cpp", "#include <torch/all.h>\n#include <sys.h>\n"),
        (
            "src/sys.h",
            "// local copy, shadowed by the system root for <>\n",
        ),
        (
            "venv/include/torch/all.h",
            "#include \"never_followed.h\"\nPyObject* o;\n",
        ),
        ("venv/include/sys.h", ""),
    ]);
    let config = ScanConfig::new(t.path()).system_root(t.path().join("venv/include"));
    let r = scan_one(t.path(), "src/a.cpp", config);
    assert_eq!(files(&r), ["src/a.cpp"]);
    assert!(
        r.python_markers.is_empty(),
        "system header was lexed: {r:?}"
    );
    assert!(r.sources[0].missing_includes.is_empty());
}

#[test]
fn quoted_include_found_only_under_system_root_is_system_and_never_named() {
    let t = tree(&[
        ("proj/a.cu", "#include \"cuda_runtime.h\"\n"),
        ("venv/nvidia/include/cuda_runtime.h", "PyObject* o;\n"),
    ]);
    let venv = t.path().join("venv/nvidia/include");
    let config = ScanConfig::new(t.path().join("proj")).system_root(&venv);
    let r = scan_one(&t.path().join("proj"), "a.cu", config);
    assert_eq!(files(&r), ["a.cu"]);
    assert!(r.sources[0].missing_includes.is_empty());
    let text = format!("{r:?}{}", render_summary(&r));
    assert!(
        !text.contains("venv"),
        "system path leaked into the report: {text}"
    );
}

#[test]
fn quoted_local_header_wins_over_system_root() {
    let t = tree(&[
        ("a.cpp", "#include \"common.h\"\n"),
        ("common.h", ""),
        ("sys/common.h", ""),
    ]);
    let config = ScanConfig::new(t.path()).system_root(t.path().join("sys"));
    let r = scan_one(t.path(), "a.cpp", config);
    assert_eq!(files(&r), ["a.cpp", "common.h"]);
}

#[test]
fn missing_quoted_include_is_recorded_as_file_colon_name() {
    let t = tree(&[
        (
            "src/a.cpp",
            "#include \"b.h\"\n#include \"gone.h\"\n#include \"gone.h\"\n",
        ),
        ("src/b.h", "#include \"sub/also_gone.h\"\n"),
    ]);
    let r = scan_one(t.path(), "src/a.cpp", ScanConfig::new(t.path()));
    assert_eq!(
        r.sources[0].missing_includes,
        ["src/a.cpp:gone.h", "src/b.h:sub/also_gone.h"]
    );
}

#[test]
fn unresolved_angle_include_is_skipped_silently() {
    let t = tree(&[("a.cpp", "#include <vector>\n#include <nowhere/x.h>\n")]);
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["a.cpp"]);
    assert!(r.sources[0].missing_includes.is_empty());
}

#[test]
fn absolute_include_is_used_when_it_exists() {
    let t = tree(&[("ext/x.h", "PyObject* o;\n")]);
    let abs = t.path().join("ext/x.h");
    write_all(
        t.path(),
        &[(
            "a.cpp",
            &format!(
                "#include \"{}\"\n#include \"/no/such/abicache.h\"\n",
                abs.display()
            ),
        )],
    );
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["a.cpp", "ext/x.h"]);
    assert_eq!(r.sources[0].missing_includes, ["a.cpp:/no/such/abicache.h"]);
}

#[test]
fn directory_named_like_a_header_is_not_a_header() {
    let t = tree(&[("a.cpp", "#include \"cute\"\n"), ("cute/x.h", "")]);
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(r.sources[0].missing_includes, ["a.cpp:cute"]);
}

#[test]
fn a_name_through_a_missing_or_non_directory_component_is_found_nowhere() {
    // The resolver answers every name under a missing directory (or a file
    // used as one) without looking, from one `stat` of the directory: as
    // the kernel resolves a path's components in order, `gone/../x.h` is
    // not `x.h` while `gone` is missing, and is once `gone` exists.
    let t = tree(&[
        (
            "src/a.cpp",
            "#include \"there/../x.h\"\n#include \"gone/../x.h\"\n\
             #include \"gone/deeper/y.h\"\n#include \"x.h/y.h\"\n#include \"lib/deep/z.h\"\n",
        ),
        ("src/there/keep", ""),
        ("src/x.h", "int x;\n"),
        ("inc2/lib/deep/z.h", "int z;\n"),
    ]);
    let config = ScanConfig::new(t.path())
        .include_path(t.path().join("inc1"))
        .include_path(t.path().join("inc2"));
    let r = scan_one(t.path(), "src/a.cpp", config.clone());
    assert_eq!(files(&r), ["src/a.cpp", "src/x.h", "inc2/lib/deep/z.h"]);
    assert_eq!(
        r.sources[0].missing_includes,
        [
            "src/a.cpp:gone/../x.h",
            "src/a.cpp:gone/deeper/y.h",
            "src/a.cpp:x.h/y.h"
        ]
    );
    fs::create_dir_all(t.path().join("src/gone")).unwrap();
    let r = scan_one(t.path(), "src/a.cpp", config);
    assert_eq!(
        r.sources[0].missing_includes,
        ["src/a.cpp:gone/deeper/y.h", "src/a.cpp:x.h/y.h"]
    );
}

// ---- traversal ------------------------------------------------------------

#[test]
fn files_are_listed_depth_first_in_include_order_each_once() {
    let t = tree(&[
        (
            "a.cpp",
            "#include \"b.h\"\n#include \"c.h\"\n#include \"b.h\"\n",
        ),
        ("b.h", "#include \"d.h\"\n#include \"c.h\"\n"),
        ("c.h", "#include \"d.h\"\n"),
        ("d.h", ""),
    ]);
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["a.cpp", "b.h", "d.h", "c.h"]);
}

#[test]
fn wide_graph_order_is_preorder_dfs_and_stable_across_runs() {
    // Wide enough that files are read on two threads; the order must still
    // be exactly the recursive depth-first preorder.
    const N: usize = 120;
    let children = |i: usize| {
        vec![
            format!("h{}.h", (i * 7 + 3) % N),
            format!("leaf{}.h", i % 13),
        ]
    };
    let t = tempfile::tempdir().unwrap();
    let mut src = String::new();
    for i in 0..N {
        src.push_str(&format!("#include \"h{i}.h\"\n"));
        let body: String = children(i)
            .iter()
            .map(|c| format!("#include \"{c}\"\n"))
            .collect();
        fs::write(t.path().join(format!("h{i}.h")), body).unwrap();
    }
    for j in 0..13 {
        fs::write(
            t.path().join(format!("leaf{j}.h")),
            format!("// leaf {j}\n"),
        )
        .unwrap();
    }
    fs::write(t.path().join("a.cpp"), &src).unwrap();

    fn visit(name: String, kids: &dyn Fn(usize) -> Vec<String>, seen: &mut Vec<String>) {
        if seen.contains(&name) {
            return;
        }
        seen.push(name.clone());
        if let Some(i) = name.strip_prefix('h').and_then(|r| r.strip_suffix(".h")) {
            for c in kids(i.parse().unwrap()) {
                visit(c, kids, seen);
            }
        }
    }
    let mut want = vec!["a.cpp".to_owned()];
    for i in 0..N {
        visit(format!("h{i}.h"), &children, &mut want);
    }
    let first = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&first), want);
    for _ in 0..3 {
        assert_eq!(
            scan_one(t.path(), "a.cpp", ScanConfig::new(t.path())),
            first
        );
    }
}

#[test]
fn sources_scanned_together_give_each_the_report_it_has_alone() {
    // Five sources sharing headers (the first walked on the calling thread,
    // the others beside it): each lists exactly what it lists alone, and
    // the facts follow the files' first visits, source after source.
    let t = tree(&[
        ("s0.cpp", "#include \"a.h\"\n#include \"gone.h\"\n"),
        (
            "s1.cpp",
            "#include \"b.h\"\n#include \"a.h\"\n#include KERNEL\n",
        ),
        ("s2.cpp", "#include \"sub/c.h\"\n"),
        (
            "s3.cpp",
            "#include \"a.h\"\n#include \"sub/c.h\"\n#include \"b.h\"\n",
        ),
        ("s4.cpp", "PyObject* o;\n#include \"gone.h\"\n"),
        (
            "a.h",
            "#include \"b.h\"\n#include \"missing_in_a.h\"\n#define KERNEL \"sub/k.h\"\n",
        ),
        ("b.h", "#include \"sub/c.h\"\nint x = PyLong_FromLong(1);\n"),
        ("sub/c.h", "#include \"../a.h\"\n#include \"d.h\"\n"),
        ("sub/d.h", "#include <vector>\n"),
        ("sub/k.h", "// reached through KERNEL\n"),
    ]);
    let names = ["s0.cpp", "s1.cpp", "s2.cpp", "s3.cpp", "s4.cpp"];
    let sources: Vec<PathBuf> = names.iter().map(|n| t.path().join(n)).collect();
    let config = ScanConfig::new(t.path());
    let together = scan(&sources, &config).unwrap();
    assert_eq!(together.sources.len(), names.len());
    for (k, source) in sources.iter().enumerate() {
        let alone = scan(std::slice::from_ref(source), &config).unwrap();
        assert_eq!(together.sources[k], alone.sources[0], "{}", names[k]);
    }
    let s1: Vec<&str> = together.sources[1].files.iter().map(|f| &*f.path).collect();
    assert!(s1.contains(&"sub/k.h"), "{s1:?}");
    assert_eq!(
        together.sources[0].missing_includes,
        ["s0.cpp:gone.h", "a.h:missing_in_a.h"]
    );
    let mut first_visits: Vec<&str> = Vec::new();
    for s in &together.sources {
        for f in &s.files {
            if !first_visits.contains(&&*f.path) {
                first_visits.push(&f.path);
            }
        }
    }
    let marked: Vec<usize> = together
        .python_markers
        .iter()
        .map(|m| first_visits.iter().position(|f| *f == m.file).unwrap())
        .collect();
    assert!(marked.windows(2).all(|w| w[0] <= w[1]), "{marked:?}");
    assert!(marked.contains(&first_visits.iter().position(|f| *f == "b.h").unwrap()));
    assert!(marked.contains(&first_visits.iter().position(|f| *f == "s4.cpp").unwrap()));
}

#[test]
fn include_cycle_terminates_with_each_file_once() {
    let t = tree(&[
        ("a.cpp", "#include \"x.h\"\n"),
        ("x.h", "#include \"y.h\"\n"),
        ("y.h", "#include \"x.h\"\n#include \"a.cpp\"\n"),
    ]);
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["a.cpp", "x.h", "y.h"]);
}

#[test]
fn ten_thousand_deep_include_chain_does_not_overflow_the_stack() {
    let t = tempfile::tempdir().unwrap();
    const N: usize = 10_000;
    for i in 0..N {
        let body = if i + 1 < N {
            format!("#include \"h{}.h\"\n", i + 1)
        } else {
            "PyObject* deepest;\n".to_owned()
        };
        fs::write(t.path().join(format!("h{i}.h")), body).unwrap();
    }
    let r = scan_one(t.path(), "h0.h", ScanConfig::new(t.path()));
    assert_eq!(r.sources[0].files.len(), N);
    assert_eq!(&*r.sources[0].files[N - 1].path, format!("h{}.h", N - 1));
    assert_eq!(r.python_markers[0].file, format!("h{}.h", N - 1));
}

#[test]
fn shared_headers_contribute_facts_once_in_first_visit_order() {
    let t = tree(&[
        ("a.cpp", "#include \"shared.h\"\n#include <ATen/ATen.h>\n"),
        ("b.cpp", "#include \"shared.h\"\n#include \"only_b.h\"\n"),
        (
            "shared.h",
            "#include <torch/csrc/stable/library.h>\nPyObject* o;\n",
        ),
        (
            "only_b.h",
            "STABLE_TORCH_LIBRARY(ns, m) {}\n#include MACRO\n",
        ),
    ]);
    let sources = [t.path().join("a.cpp"), t.path().join("b.cpp")];
    let r = scan(&sources, &ScanConfig::new(t.path())).unwrap();
    let per_source: Vec<Vec<&str>> = r
        .sources
        .iter()
        .map(|s| s.files.iter().map(|f| &*f.path).collect())
        .collect();
    assert_eq!(
        per_source,
        [
            vec!["a.cpp", "shared.h"],
            vec!["b.cpp", "shared.h", "only_b.h"]
        ]
    );
    assert_eq!(r.sources[0].files[1], r.sources[1].files[1]);
    let markers: Vec<(&str, u32, &str)> = r
        .python_markers
        .iter()
        .map(|m| (m.file.as_str(), m.line, m.marker.as_str()))
        .collect();
    assert_eq!(
        markers,
        [
            ("shared.h", 2, "PyObject"),
            ("only_b.h", 2, "#include MACRO")
        ]
    );
    let torch: Vec<(&str, &str, bool)> = r
        .torch_includes
        .iter()
        .map(|t| (t.file.as_str(), t.include.as_str(), t.stable))
        .collect();
    assert_eq!(
        torch,
        [
            ("a.cpp", "ATen/ATen.h", false),
            ("shared.h", "torch/csrc/stable/library.h", true)
        ]
    );
    assert_eq!(r.stable_registrations.len(), 1);
    assert!(r.sources[0].computed_includes.is_empty());
    assert_eq!(r.sources[1].computed_includes[0].text, "MACRO");
    assert_eq!(r.sources[1].computed_includes[0].file, "only_b.h");
}

#[test]
fn torch_headers_are_classified_stable_or_not() {
    let t = tree(&[(
        "a.cpp",
        "#include <torch/headeronly/util.h>\n#include <torch/csrc/stable/ops.h>\n#include <torch/torch.h>\n#include <c10/core/Device.h>\n#include \"caffe2/x.h\"\n#include <torchvision/x.h>\n",
    )]);
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    let got: Vec<(&str, bool)> = r
        .torch_includes
        .iter()
        .map(|t| (t.include.as_str(), t.stable))
        .collect();
    assert_eq!(
        got,
        [
            ("torch/headeronly/util.h", true),
            ("torch/csrc/stable/ops.h", true),
            ("torch/torch.h", false),
            ("c10/core/Device.h", false),
            ("caffe2/x.h", false),
        ]
    );
    assert!(!r.stable_candidate());
}

// ---- identity ----------------------------------------------------------------

#[test]
fn editing_a_header_changes_its_blake3_only() {
    let t = tree(&[("a.cpp", "#include \"h.h\"\n"), ("h.h", "int x;\n")]);
    let before = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    fs::write(t.path().join("h.h"), "int x = 1;\n").unwrap();
    let after = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(before.sources[0].files[0], after.sources[0].files[0]);
    assert_ne!(
        before.sources[0].files[1].blake3,
        after.sources[0].files[1].blake3
    );
    assert_eq!(
        &*after.sources[0].files[1].blake3,
        blake3::hash(b"int x = 1;\n").to_hex().as_str()
    );
}

#[test]
fn same_tree_under_two_roots_gives_identical_reports() {
    let files = [
        (
            "src/a.cpp",
            "#include \"b.h\"\n#include <inc/c.h>\n#include \"missing.h\"\n#include M\n",
        ),
        ("src/b.h", "PyObject* o;\n"),
        ("include/inc/c.h", "#include <ATen/ATen.h>\n"),
    ];
    let one = tree(&files);
    let two = tree(&files);
    let report = |root: &Path| {
        let config = ScanConfig::new(root).include_path(root.join("include"));
        scan_one(root, "src/a.cpp", config)
    };
    assert_eq!(report(one.path()), report(two.path()));
}

#[test]
fn files_outside_the_root_keep_their_absolute_canonical_path() {
    let outside = tree(&[("ext.h", "")]);
    let t = tree(&[("a.cpp", "#include \"ext.h\"\n")]);
    let config = ScanConfig::new(t.path()).include_path(outside.path());
    let r = scan_one(t.path(), "a.cpp", config);
    let canonical = fs::canonicalize(outside.path().join("ext.h")).unwrap();
    assert_eq!(files(&r), ["a.cpp", canonical.to_str().unwrap()]);
}

#[test]
fn relative_root_and_sources_are_relative_to_cwd() {
    let t = tree(&[("a.cpp", "#include \"b.h\"\n"), ("b.h", "")]);
    let cwd = std::env::current_dir().unwrap();
    let rel = pathdiff(t.path(), &cwd);
    let r = scan(&[rel.join("a.cpp")], &ScanConfig::new(&rel)).unwrap();
    assert_eq!(files(&r), ["a.cpp", "b.h"]);
}

/// `path` relative to `base` (both absolute), via `..` steps.
fn pathdiff(path: &Path, base: &Path) -> PathBuf {
    let path = fs::canonicalize(path).unwrap();
    let base = fs::canonicalize(base).unwrap();
    let common = path
        .components()
        .zip(base.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in base.components().skip(common) {
        out.push("..");
    }
    for c in path.components().skip(common) {
        out.push(c);
    }
    out
}

// ---- hostile inputs ----------------------------------------------------------

#[cfg(unix)]
#[test]
fn symlink_loop_include_is_unresolved_not_a_hang() {
    use std::os::unix::fs::symlink;
    let t = tree(&[("a.cpp", "#include \"loop.h\"\n#include <loop2.h>\n")]);
    symlink(t.path().join("loop.h"), t.path().join("loop2.h")).unwrap();
    symlink(t.path().join("loop2.h"), t.path().join("loop.h")).unwrap();
    // A directory loop too: `d/self -> d`.
    fs::create_dir(t.path().join("d")).unwrap();
    symlink(t.path().join("d"), t.path().join("d/self")).unwrap();
    write_all(
        t.path(),
        &[
            ("b.cpp", "#include \"d/self/self/self/x.h\"\n"),
            ("d/x.h", ""),
        ],
    );
    let sources = [t.path().join("a.cpp"), t.path().join("b.cpp")];
    let r = scan(&sources, &ScanConfig::new(t.path())).unwrap();
    assert_eq!(r.sources[0].missing_includes, ["a.cpp:loop.h"]);
    assert_eq!(
        r.sources[1]
            .files
            .iter()
            .map(|f| &*f.path)
            .collect::<Vec<_>>(),
        ["b.cpp", "d/x.h"]
    );
}

#[cfg(unix)]
#[test]
fn symlink_loop_as_a_source_is_an_error_naming_it() {
    use std::os::unix::fs::symlink;
    let t = tempfile::tempdir().unwrap();
    symlink(t.path().join("x.cpp"), t.path().join("y.cpp")).unwrap();
    symlink(t.path().join("y.cpp"), t.path().join("x.cpp")).unwrap();
    let err = scan(&[t.path().join("x.cpp")], &ScanConfig::new(t.path())).unwrap_err();
    assert!(matches!(err, ScanError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains("x.cpp"), "{err}");
}

#[cfg(unix)]
#[test]
fn symlinked_header_resolves_its_includes_from_where_it_was_found() {
    // Like a Bazel symlink forest: forest/x.h -> real/x.h, and x.h's
    // sibling y.h exists only in the forest, as for the compiler.
    use std::os::unix::fs::symlink;
    let t = tree(&[
        ("forest/a.cpp", "#include \"x.h\"\n"),
        ("real/x.h", "#include \"y.h\"\n"),
        ("gen/y.h", ""),
    ]);
    symlink(t.path().join("real/x.h"), t.path().join("forest/x.h")).unwrap();
    symlink(t.path().join("gen/y.h"), t.path().join("forest/y.h")).unwrap();
    let r = scan_one(t.path(), "forest/a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["forest/a.cpp", "real/x.h", "gen/y.h"]);
    assert!(r.sources[0].missing_includes.is_empty());
}

#[test]
fn fifty_megabyte_file_is_scanned() {
    let t = tempfile::tempdir().unwrap();
    let mut big = Vec::with_capacity(50 << 20);
    let chunk = b"static const char* s = \"#include \\\"no.h\\\"\"; /* py::x */ int v = 1'000; // PyHidden\n";
    while big.len() < 50 << 20 {
        big.extend_from_slice(chunk);
    }
    let lines = big.iter().filter(|&&c| c == b'\n').count() as u32;
    big.extend_from_slice(b"#include \"tail.h\"\nPyObject* last;\n");
    fs::write(t.path().join("big.cpp"), &big).unwrap();
    fs::write(t.path().join("tail.h"), "").unwrap();
    let r = scan_one(t.path(), "big.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["big.cpp", "tail.h"]);
    assert_eq!(r.python_markers.len(), 1);
    assert_eq!(r.python_markers[0].line, lines + 2);
}

#[test]
fn non_utf8_content_and_names_are_scanned() {
    let t = tempfile::tempdir().unwrap();
    fs::write(
        t.path().join("a.cpp"),
        b"// \xff\xfe\n#include \"b.h\"\nconst char* s = \"\xe9\";\n".as_slice(),
    )
    .unwrap();
    fs::write(t.path().join("b.h"), b"\x80\x81 PyObject* o;\n".as_slice()).unwrap();
    let r = scan_one(t.path(), "a.cpp", ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["a.cpp", "b.h"]);
    assert_eq!(r.python_markers[0].marker, "PyObject");
}

// ---- errors --------------------------------------------------------------------

fn error_text(err: &ScanError, tmp: &Path) -> String {
    err.to_string().replace(&tmp.display().to_string(), "[TMP]")
}

#[test]
fn missing_source_is_an_error_naming_the_path() {
    let t = tree(&[("a.cpp", "")]);
    let sources = [t.path().join("a.cpp"), t.path().join("src/typo.cpp")];
    let err = scan(&sources, &ScanConfig::new(t.path())).unwrap_err();
    assert!(matches!(err, ScanError::MissingSource { .. }));
    insta::assert_snapshot!("missing_source", error_text(&err, t.path()));
}

#[test]
fn unreadable_source_is_an_error_naming_the_path() {
    let t = tree(&[("dir.cpp/x", "")]);
    let err = scan(&[t.path().join("dir.cpp")], &ScanConfig::new(t.path())).unwrap_err();
    let canonical_tmp = fs::canonicalize(t.path()).unwrap();
    insta::assert_snapshot!("unreadable_source", error_text(&err, &canonical_tmp));
}

#[test]
fn invalid_root_is_an_error_naming_the_path() {
    let t = tree(&[("a.cpp", "")]);
    let config = ScanConfig::new(t.path().join("no-such-root"));
    let err = scan(&[t.path().join("a.cpp")], &config).unwrap_err();
    insta::assert_snapshot!("invalid_root", error_text(&err, t.path()));
    let config = ScanConfig::new(t.path().join("a.cpp"));
    let err = scan(&[t.path().join("a.cpp")], &config).unwrap_err();
    insta::assert_snapshot!("root_not_a_directory", error_text(&err, t.path()));
}

// ---- summary -------------------------------------------------------------------

#[test]
fn summary_shows_files_evidence_and_verdicts() {
    let t = tree(&[
        (
            "src/ext.cpp",
            "#include <torch/extension.h>\n#include \"kernels.h\"\n#include \"generated.h\"\n#include KERNEL_HEADER\n\nPYBIND11_MODULE(ext, m) {}\n",
        ),
        ("src/kernels.h", "#include <ATen/ATen.h>\nauto f() { return py::none(); }\n"),
        ("src/other.cpp", "#include \"kernels.h\"\n"),
    ]);
    let sources = [t.path().join("src/ext.cpp"), t.path().join("src/other.cpp")];
    let r = scan(&sources, &ScanConfig::new(t.path())).unwrap();
    insta::assert_snapshot!("summary_python_dependent", render_summary(&r));
}

#[test]
fn summary_of_a_stable_candidate() {
    let t = tree(&[(
        "ops.cpp",
        "#include <torch/csrc/stable/library.h>\n#include <torch/headeronly/macros/Macros.h>\n\nSTABLE_TORCH_LIBRARY(ops, m) {}\n",
    )]);
    let r = scan_one(t.path(), "ops.cpp", ScanConfig::new(t.path()));
    assert!(r.stable_candidate());
    insta::assert_snapshot!("summary_stable_candidate", render_summary(&r));
}
