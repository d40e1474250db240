//! The main path on a real CPU `torch.ops` extension in two translation
//! units (`examples/cpu_muladd`): cold build, load with torch, hit, audit,
//! `ls`/`stats`/`explain`, then an edit of one unit.
//!
//! One test function, so the two units compile once (plus the edited one).

use crate::common;

use common::*;

const CALL_MULADD: &str = r#"
import sys, torch
torch.ops.load_library(sys.argv[1])
a = torch.tensor([1.0, 2.0, 3.0])
b = torch.tensor([4.0, 5.0, 6.0])
print(torch.ops.muladd_example.muladd(a, b, 0.5).tolist())
"#;

#[test]
fn cpu_muladd_builds_loads_hits_explains_and_recompiles_only_the_edited_unit() {
    let cache = Cache::new();
    let python = python();
    // Work on a copy: the test edits a source, and the key must not depend
    // on where the checkout lives.
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("cpu_muladd");
    copy_dir(&repo_path("examples/cpu_muladd"), &dir);
    let spec = dir.join("abicache.toml");

    let example_key = cache.json(args![
        "key",
        "examples/cpu_muladd/abicache.toml",
        "--python",
        python,
        "--json"
    ]);
    let example_key = example_key["key"].as_str().unwrap().to_string();

    // Cold: both units compile, the library is published.
    let cold = cache.build(&spec, &python, &[]);
    assert_eq!(cold["hit"], false, "{cold}");
    let mut compiled = strings(&cold["compiled"]);
    compiled.sort();
    assert_eq!(compiled, ["kernel.cpp", "ops.cpp"], "{cold}");
    assert_eq!(cold["cached_units"], 0, "{cold}");
    assert_eq!(
        cold["key"],
        example_key.as_str(),
        "a copy of the example has the example's key"
    );
    let library = std::path::PathBuf::from(cold["path"].as_str().unwrap());
    assert!(
        library.starts_with(&cache.dir),
        "{} is not in the cache",
        library.display()
    );
    assert!(library.is_file());

    // The op runs in a separate interpreter: a * b + 0.5.
    assert_eq!(
        python_run(&python, CALL_MULADD, &library),
        "[4.5, 10.5, 18.5]"
    );

    // Warm: a hit that compiles nothing, counted in the store.
    let warm = cache.build(&spec, &python, &[]);
    assert_eq!(warm["hit"], true, "{warm}");
    assert_eq!(strings(&warm["compiled"]), Vec::<String>::new());
    assert_eq!(warm["path"], cold["path"]);
    assert_eq!(warm["key"], cold["key"]);
    let stats = cache.stats();
    assert_eq!(
        (
            u64_of(&stats, "hits"),
            u64_of(&stats, "misses"),
            u64_of(&stats, "builds"),
            u64_of(&stats, "entries")
        ),
        (1, 1, 1, 1),
        "{stats}"
    );
    assert_eq!(
        (u64_of(&stats, "errors"), u64_of(&stats, "corrupt")),
        (0, 0),
        "{stats}"
    );

    // Issue 5 (b): a plain torch.ops library imports libtorch's C++ ABI, not CPython's.
    let audit = cache.json(args!["audit", library, "--json"]);
    let imports = &audit["imports"];
    assert_eq!(
        strings(&imports["cpython"]),
        Vec::<String>::new(),
        "{audit}"
    );
    assert_eq!(
        strings(&imports["libtorch_python"]),
        Vec::<String>::new(),
        "{audit}"
    );
    let cxx = strings(&imports["libtorch_cxx"]);
    assert!(
        cxx.iter().any(|s| s.starts_with("_ZN3c10")),
        "no c10:: import in {cxx:?}"
    );
    assert!(
        strings(&audit["needed"])
            .iter()
            .all(|n| !n.starts_with("libtorch_python") && !n.starts_with("libpython")),
        "{audit}"
    );

    // `ls --json` shows the entry with the audit stored at publish time.
    let entries = cache.ls();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["key"], cold["key"]);
    assert_eq!(entry["name"], "muladd_example");
    assert_eq!(entry["library"], cold["path"]);
    assert_eq!(entry["python_abi"], "agnostic");
    assert_eq!(
        entry["torch_abi"], "2.15.0",
        "a CPU extension keys torch without the +cu local tag"
    );
    assert_eq!(entry["units"], 2);
    assert_eq!(
        entry["audit"], audit,
        "the stored audit is what `abicache audit` reports"
    );

    // `explain --json` of a hit carries the same audit.
    let explained = cache.json(args!["explain", spec, "--python", python, "--json"]);
    assert_eq!(explained["cached"], true, "{explained}");
    assert_eq!(explained["audit"], audit);

    // Human output of `ls`, `stats` and `explain` (a hit, and a miss for torch 2.12).
    let ls = cache.run(["ls"]);
    assert_success(&ls);
    let stats = cache.run(["stats"]);
    assert_success(&stats);
    let explain_hit = cache.run(args!["explain", spec, "--python", python]);
    assert_success(&explain_hit);
    let explain_miss = cache.run(args!["explain", spec, "--python", python_compat()]);
    assert_success(&explain_miss);
    assert!(
        stdout(&explain_miss).contains("torch: 2.15.0 -> 2.12.1"),
        "explain names the torch change:\n{}",
        stdout(&explain_miss)
    );
    let settings = cache.settings();
    settings.bind(|| {
        insta::assert_snapshot!("ls_one_entry", stdout(&ls));
        insta::assert_snapshot!("stats_after_one_build_and_one_hit", stdout(&stats));
        insta::assert_snapshot!("explain_hit", stdout(&explain_hit));
        insta::assert_snapshot!(
            "explain_miss_torch_2_12_differs_only_in_torch",
            stdout(&explain_miss)
        );
    });

    // Editing one of two units recompiles exactly that one. A comment is
    // enough: it changes the file's hash, hence the key and the unit's object key.
    let kernel = dir.join("kernel.cpp");
    let mut text = std::fs::read_to_string(&kernel).unwrap();
    text.push_str("// edited by the test\n");
    std::fs::write(&kernel, text).unwrap();
    let edited = cache.build(&spec, &python, &[]);
    assert_eq!(edited["hit"], false, "{edited}");
    assert_eq!(strings(&edited["compiled"]), ["kernel.cpp"], "{edited}");
    assert_eq!(edited["cached_units"], 1, "{edited}");
    assert_ne!(edited["key"], cold["key"]);
    assert_eq!(
        python_run(
            &python,
            CALL_MULADD,
            std::path::Path::new(edited["path"].as_str().unwrap())
        ),
        "[4.5, 10.5, 18.5]"
    );
    assert_eq!(u64_of(&cache.stats(), "builds"), 2);
    assert_eq!(cache.ls().len(), 2, "the old entry stays until gc");
}
