//! The stable-ABI example (one binary for torch 2.15 and 2.12) and the CUDA
//! example (pip nvcc, no GPU needed to build or load).

use crate::common;

use std::path::Path;

use common::*;

const CALL_SCALE_SHIFT: &str = r#"
import sys, torch
torch.ops.load_library(sys.argv[1])
print(torch.__version__.split("+")[0], torch.ops.stable_scale.scale_shift(torch.arange(4.0), 2.0, 1.0).tolist())
"#;

#[test]
fn stable_example_built_on_torch_2_15_is_a_hit_and_runs_on_torch_2_12() {
    let cache = Cache::new();
    let spec = repo_path("examples/stable_scale/abicache.toml");
    let built = cache.build(&spec, &python(), &[]);
    assert_eq!(built["hit"], false, "{built}");
    assert_eq!(strings(&built["compiled"]), ["scale.cpp"]);
    let library = Path::new(built["path"].as_str().unwrap());
    assert_eq!(
        python_run(&python(), CALL_SCALE_SHIFT, library),
        "2.15.0 [1.0, 3.0, 5.0, 7.0]"
    );

    // The same entry serves torch 2.12: the key carries `stable-2.10`, not the torch version.
    let compat = cache.build(&spec, &python_compat(), &[]);
    assert_eq!(compat["hit"], true, "{compat}");
    assert_eq!(compat["path"], built["path"]);
    assert_eq!(strings(&compat["compiled"]), Vec::<String>::new());
    assert_eq!(
        python_run(&python_compat(), CALL_SCALE_SHIFT, library),
        "2.12.1 [1.0, 3.0, 5.0, 7.0]"
    );
    let stats = cache.stats();
    assert_eq!(
        (u64_of(&stats, "builds"), u64_of(&stats, "hits")),
        (1, 1),
        "{stats}"
    );

    // Issue 5 (c): only the stable C shim, libstdc++ and libc: no libtorch C++, no CPython, no CUDA.
    let audit = cache.json(args!["audit", library, "--json"]);
    let imports = &audit["imports"];
    for empty in ["cpython", "libtorch_python", "libtorch_cxx", "cuda"] {
        assert_eq!(
            strings(&imports[empty]),
            Vec::<String>::new(),
            "`{empty}` imports in {audit}"
        );
    }
    let shim = strings(&imports["torch_stable_c"]);
    assert!(
        shim.iter().any(|s| s.starts_with("aoti_torch_")),
        "{shim:?}"
    );
    assert!(!strings(&imports["libstdcxx"]).is_empty(), "{audit}");
    assert!(
        strings(&imports["other"])
            .iter()
            .any(|s| s == "memset" || s == "strlen" || s == "__cxa_finalize"),
        "{audit}"
    );
    let entry = &cache.ls()[0];
    assert_eq!(entry["torch_abi"], "stable-2.10");
    assert_eq!(entry["audit"], audit);
    let human = cache.run(args!["audit", library]);
    assert_success(&human);
    assert!(
        stdout(&human).contains("libtorch: stable C ABI only"),
        "{}",
        stdout(&human)
    );
}

#[test]
fn cuda_example_compiles_with_the_pip_nvcc_links_and_loads_without_a_gpu() {
    let cache = Cache::new();
    let spec = repo_path("examples/cuda_axpy/abicache.toml");
    let built = cache.build(&spec, &python(), &[]);
    assert_eq!(built["hit"], false, "{built}");
    let mut compiled = strings(&built["compiled"]);
    compiled.sort();
    assert_eq!(compiled, ["axpy_kernel.cu", "ops.cpp"]);
    // The `.cu` unit compiled through nvcc's phase split: one sm_90 device
    // step, counted in the stats (docs/building.md, "CUDA device code per
    // architecture"); the library below loads.
    let stats = cache.stats();
    assert_eq!(
        (
            stats["device_steps"]["sm_90"]["reused"].as_u64(),
            stats["device_steps"]["sm_90"]["compiled"].as_u64()
        ),
        (Some(0), Some(1)),
        "{stats}"
    );

    // A CUDA key names the full torch build, its CUDA, the archs and nvcc.
    let key = cache.json(args!["key", spec, "--python", python(), "--json"]);
    assert_eq!(key["key"], built["key"]);
    let payload = strings(&key["payload"]);
    let field = |name: &str| {
        payload
            .iter()
            .find_map(|l| l.strip_prefix(name))
            .map(str::to_owned)
    };
    assert!(
        field("torch=").is_some_and(|v| v.starts_with("2.15.0+cu")),
        "{payload:?}"
    );
    assert!(field("torch_cuda=").is_some(), "{payload:?}");
    assert!(field("nvcc=").is_some(), "{payload:?}");
    assert!(
        payload.iter().any(|l| l.contains("sm_90")),
        "cuda_archs 9.0 gives sm_90 code: {payload:?}"
    );

    let library = Path::new(built["path"].as_str().unwrap());
    let audit = cache.json(args!["audit", library, "--json"]);
    assert!(!strings(&audit["imports"]["cuda"]).is_empty(), "{audit}");
    assert_eq!(
        strings(&audit["imports"]["cpython"]),
        Vec::<String>::new(),
        "{audit}"
    );

    // Loading needs no GPU: the op is registered. Calling it would need a CUDA
    // device, which the test machines do not have, so the test stops here.
    let registered = python_run(
        &python(),
        "import sys, torch\ntorch.ops.load_library(sys.argv[1])\nprint(torch.ops.cuda_axpy.axpy.default._schema)",
        library,
    );
    assert_eq!(
        registered,
        "cuda_axpy::axpy(float alpha, Tensor x, Tensor y) -> Tensor"
    );
    assert_eq!(cache.build(&spec, &python(), &[])["hit"], true);
}

/// A `.cu` unit with relocatable device code is not split into nvcc's
/// phases: it compiles in one step, `--verbose` says why, and no device
/// step is counted.
#[test]
fn an_rdc_unit_compiles_in_one_step_and_verbose_says_why() {
    let cache = Cache::new();
    let project = cache.dir.with_file_name("rdc");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("kernel.cu"),
        "__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n\
         extern \"C\" void launch_twice(float* x) { twice<<<1, 32>>>(x); }\n",
    )
    .unwrap();
    let spec = project.join("abicache.toml");
    std::fs::write(
        &spec,
        "[[extension]]\nname = \"rdc_t\"\nsources = [\"kernel.cu\"]\ncuda_archs = \"9.0\"\n\
         extra_cuda_cflags = [\"-rdc=true\"]\n",
    )
    .unwrap();
    let out = cache.run(args![
        "--verbose",
        "build",
        &spec,
        "--python",
        python(),
        "--quiet",
        "--json"
    ]);
    assert_success(&out);
    assert!(
        stderr(&out)
            .contains("kernel.cu: compiled in one step (relocatable device code, -rdc=true)"),
        "{}",
        stderr(&out)
    );
    let stats = cache.stats();
    assert!(
        stats["device_steps"]
            .as_object()
            .is_some_and(|m| m.is_empty()),
        "{stats}"
    );
}
