//! Relocatable objects end to end: a second checkout of `examples/cpu_muladd` at another
//! path, with one unit edited, compiles exactly that unit through the shared cache, and
//! the library it links from the other checkout's object works.

use crate::common;

use common::*;

const CALL_MULADD: &str = r#"
import sys, torch
torch.ops.load_library(sys.argv[1])
a = torch.tensor([1.0, 2.0])
b = torch.tensor([3.0, 4.0])
print(torch.ops.muladd_example.muladd(a, b, 0.5).tolist())
"#;

#[test]
fn a_second_checkout_with_one_unit_edited_compiles_only_that_unit() {
    let cache = Cache::new();
    let python = python();
    let work = tempfile::tempdir().unwrap();
    let first = work.path().join("alice/src/cpu_muladd");
    let second = work.path().join("runner/_work/7/cpu_muladd");
    copy_dir(&repo_path("examples/cpu_muladd"), &first);
    copy_dir(&repo_path("examples/cpu_muladd"), &second);
    let kernel = second.join("kernel.cpp");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(
        &kernel,
        text + "\nint relocatable_test_edit() { return 1; }\n",
    )
    .unwrap();

    let cold = cache.build(&first.join("abicache.toml"), &python, &[]);
    let mut compiled = strings(&cold["compiled"]);
    compiled.sort();
    assert_eq!(compiled, ["kernel.cpp", "ops.cpp"], "{cold}");

    // The key does not depend on where the checkout lives.
    let example = cache.json(args![
        "key",
        repo_path("examples/cpu_muladd/abicache.toml"),
        "--python",
        python,
        "--json"
    ]);
    assert_eq!(example["key"], cold["key"], "{example}");

    let moved = cache.build(&second.join("abicache.toml"), &python, &[]);
    assert_eq!(moved["hit"], false, "the edit changes the key: {moved}");
    assert_eq!(strings(&moved["compiled"]), ["kernel.cpp"], "{moved}");
    assert_eq!(moved["cached_units"], 1, "{moved}");
    let library = std::path::PathBuf::from(moved["path"].as_str().unwrap());
    assert_eq!(python_run(&python, CALL_MULADD, &library), "[3.5, 8.5]");
}
