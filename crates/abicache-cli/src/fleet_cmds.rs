//! `abicache prebuild`, `export` and `import`: a fleet's matrix built once,
//! carried anywhere as one signed file.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use abicache::build::{progress_reporter, ProgressMode};
use abicache::remote::Keys;
use abicache::settings::Settings;
use abicache::store::Store;
use abicache::SessionOptions;
use abicache_fleet::bundle::{self, ImportReport};
use abicache_fleet::{MatrixError, MatrixOptions, PrebuildRequest};
use anyhow::{bail, Context, Result};
use clap::Args;

use crate::output::{emit, print_json};
use crate::render::human_size;

/// `abicache prebuild`.
#[derive(Debug, Args)]
pub struct PrebuildArgs {
    /// Spec files (`abicache.toml`); each one's directory is its extensions' fingerprint root.
    #[arg(required_unless_present = "plan", value_name = "SPEC.toml")]
    pub specs: Vec<PathBuf>,
    /// A prebuild plan directory written by `abicache run --record PLAN` (repeatable): every
    /// extension it lists, from its own copy of the sources. Without `--python`, `--env` or
    /// `--matrix`, for this environment's interpreter (`$VIRTUAL_ENV`, else `python3` on `PATH`).
    #[arg(long, value_name = "PLAN")]
    pub plan: Vec<PathBuf>,
    /// Only these extensions (repeatable) [default: every extension of every spec].
    #[arg(long, value_name = "NAME")]
    pub extension: Vec<String>,
    /// An interpreter with torch to key and build for (repeatable).
    #[arg(long, value_name = "PATH")]
    pub python: Vec<PathBuf>,
    /// An environment TOML (repeatable); one without a torch installation (`torch_dir`) is keyed only.
    #[arg(long, value_name = "ENV.toml")]
    pub env: Vec<PathBuf>,
    /// Also every Python × torch release of this matrix; those no `--python` covers are
    /// created with `uv` (installed interpreters only; torch without its CUDA dependencies).
    #[arg(long, value_name = "'python=3.10,3.12 torch=2.12,2.15'")]
    pub matrix: Option<String>,
    /// The `uv` that creates the matrix's environments [default: `uv` on `PATH`].
    #[arg(long, value_name = "PATH", requires = "matrix")]
    pub uv: Option<PathBuf>,
    /// Keep the matrix's environments in DIR, and reuse the complete ones found there
    /// [default: a throwaway directory under the cache, removed at the end].
    #[arg(long, value_name = "DIR", requires = "matrix")]
    pub keep_envs: Option<PathBuf>,
    /// Parallel compile jobs [default: `MAX_JOBS`, else the number of cores].
    #[arg(long, short, value_name = "N")]
    pub jobs: Option<usize>,
    /// No build progress output.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the coverage table as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The bundle to write (`-` for stdout); written beside it and renamed into place.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "BUNDLE",
        required_unless_present = "wheel",
        conflicts_with = "wheel"
    )]
    pub output: Option<PathBuf>,
    /// Write a pip-installable cache wheel of distribution `NAME==VERSION`
    /// instead of a bundle (see docs/fleet.md, "Shipping prebuilt kernels in a wheel").
    #[arg(long, value_name = "NAME==VERSION")]
    pub wheel: Option<String>,
    /// The directory the wheel is written to.
    #[arg(
        long = "out",
        value_name = "DIR",
        default_value = ".",
        requires = "wheel"
    )]
    pub out_dir: PathBuf,
    /// Extension names, keys or key prefixes (at least 8 characters) [default: every local entry].
    #[arg(value_name = "NAME|KEY")]
    pub targets: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle to import (`-` for stdin).
    #[arg(value_name = "BUNDLE", default_value = "-")]
    pub bundle: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `abicache prebuild SPEC... (--plan PLAN)... (--python PATH)... (--env FILE)...`; exits 1
/// after printing the table when a build failed.
pub fn prebuild(store: Store, settings: &Arc<Settings>, args: PrebuildArgs) -> Result<()> {
    let mut pythons = args.python;
    // A plan is built for this environment unless another one is named.
    if !args.plan.is_empty() && pythons.is_empty() && args.env.is_empty() && args.matrix.is_none() {
        pythons.push(crate::interpreter::choose(None)?.path);
    }
    let request = PrebuildRequest {
        specs: args.specs,
        plans: args.plan,
        settings: Arc::clone(settings),
        extensions: args.extension,
        pythons,
        env_files: args.env,
        matrix: args.matrix,
        matrix_options: MatrixOptions {
            uv: args.uv,
            keep_envs: args.keep_envs,
        },
        options: SessionOptions {
            rebuild: false,
            jobs: args.jobs,
        },
    };
    let quiet = args.quiet;
    let report = move |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let mode = if args.quiet || args.json {
        ProgressMode::Quiet
    } else {
        ProgressMode::Auto
    };
    let coverage = abicache_fleet::prebuild(&store, &request, &report, &progress_reporter(mode))?;
    if args.json {
        print_json(&coverage)?;
    } else {
        emit(&abicache_fleet::render_coverage(&coverage))?;
    }
    if coverage.failed > 0 {
        // Exit 1, as a failed `build` does; the table above says which.
        return Err(crate::Exit(1).into());
    }
    Ok(())
}

/// The command-line flags that fix a prebuild error the façade words
/// without flags (it also serves `abicache.prebuild`).
pub(crate) fn flag_hint(error: &abicache_fleet::Error) -> Option<String> {
    match error {
        abicache_fleet::Error::UnknownExtension { name, .. } => {
            Some(format!("fix or drop `--extension {name}`"))
        }
        abicache_fleet::Error::Matrix(e) => matrix_flag_hint(e),
        abicache_fleet::Error::NoFleetEnvironment => Some(
            "pass `--python PATH` or `--env FILE` (repeatable), or \
             `--matrix 'python=3.10,3.12 torch=2.12,2.15'`"
                .to_owned(),
        ),
        _ => None,
    }
}

fn matrix_flag_hint(error: &MatrixError) -> Option<String> {
    Some(match error {
        MatrixError::Parse { example, .. } => {
            format!("fix `--matrix`, e.g. `--matrix '{example}'`")
        }
        MatrixError::NoUv => "or pass `--uv PATH`".to_owned(),
        MatrixError::UvMissing { path } => format!("fix or drop `--uv {}`", path.display()),
        MatrixError::UvRun { .. } => "check `--uv`".to_owned(),
        MatrixError::UvFailed { .. } => {
            "the matrix is `--matrix`; existing environments are passed with `--python`".to_owned()
        }
        MatrixError::KeepEnvsNotPrivate { path, .. } => {
            format!("fix `--keep-envs {}`", path.display())
        }
        MatrixError::NoInterpreter { .. } | MatrixError::Io(_) => return None,
    })
}

/// `abicache export -o BUNDLE [NAME|KEY]...`.
pub fn export(store: Store, settings: &Settings, args: ExportArgs) -> Result<()> {
    let keys = Keys::from_settings(&settings.remote)?;
    let entries = bundle::select_entries(&store, &args.targets)?;
    if let Some(dist) = &args.wheel {
        let dist: abicache_fleet::wheel::Dist = dist.parse()?;
        let wheel = abicache_fleet::wheel::export_wheel(
            &store,
            &entries,
            keys.signing.as_ref(),
            &dist,
            &args.out_dir,
        )?;
        if args.json {
            return print_json(&wheel);
        }
        let mut text = String::new();
        for (name, key) in &wheel.entries {
            text.push_str(&format!("exported  {name} {key}\n"));
        }
        text.push_str(&match &wheel.signed_by {
            Some(public) => format!("signed by {public}\n"),
            None => "unsigned (set `ABICACHE_SIGNING_KEY` to sign the index)\n".to_owned(),
        });
        return emit(&format!(
            "{text}wheel written to {} ({}, {})\n",
            wheel.path.display(),
            wheel.tag,
            human_size(wheel.size)
        ));
    }
    let output = args.output.expect("clap requires `-o` without `--wheel`");
    let to_stdout = output.as_os_str() == "-";
    if to_stdout && std::io::stdout().is_terminal() {
        bail!("refusing to write a bundle to a terminal; pass `-o FILE` or redirect stdout");
    }
    let exported = if to_stdout {
        let stdout = std::io::stdout().lock();
        bundle::export(&store, &entries, keys.signing.as_ref(), stdout)?
    } else {
        bundle::export_to_file(&store, &entries, keys.signing.as_ref(), &output)?
    };
    let mut text = String::new();
    for entry in &exported.entries {
        text.push_str(&format!(
            "exported  {} {} ({})\n",
            entry.name,
            entry.key,
            human_size(entry.size)
        ));
    }
    text.push_str(&match &exported.signed_by {
        Some(public) => format!("signed by {public}\n"),
        None => "unsigned (set `ABICACHE_SIGNING_KEY` to sign bundles)\n".to_owned(),
    });
    if to_stdout {
        // stdout carries the bundle: the summary goes to stderr.
        eprint!("{text}");
        return Ok(());
    }
    if args.json {
        return print_json(&exported);
    }
    emit(&format!("{text}bundle written to {}\n", output.display()))
}

/// `abicache import [BUNDLE|-]`.
pub fn import(store: Store, settings: &Settings, args: ImportArgs) -> Result<()> {
    let keys = Keys::from_settings(&settings.remote)?;
    let report = if args.bundle.as_os_str() == "-" {
        if std::io::stdin().is_terminal() {
            bail!("no bundle on stdin; pass `abicache import BUNDLE` or pipe one in");
        }
        bundle::import(&store, &keys, std::io::stdin().lock())?
    } else {
        let file = std::fs::File::open(&args.bundle)
            .with_context(|| format!("cannot open the bundle `{}`", args.bundle.display()))?;
        bundle::import_from(
            &store,
            &keys,
            std::io::BufReader::new(file),
            &args.bundle.display().to_string(),
        )?
    };
    if args.json {
        return print_json(&report);
    }
    emit(&render_import(&report))
}

fn render_import(report: &ImportReport) -> String {
    let mut text = String::new();
    for entry in &report.entries {
        let result = match entry.result {
            abicache::store::Imported::Published => "imported",
            abicache::store::Imported::AlreadyLocal => "already-local",
        };
        text.push_str(&format!("{result:<14} {} {}\n", entry.name, entry.key));
    }
    text.push_str(&match (&report.signed_by, report.trusted) {
        (Some(signer), true) => format!("signed by trusted key {signer}\n"),
        (Some(signer), false) => format!(
            "signed by {signer} (not checked against trusted keys: `ABICACHE_TRUSTED_KEYS` is unset)\n"
        ),
        (None, _) => "unsigned (set `ABICACHE_TRUSTED_KEYS` to accept signed bundles only)\n".to_owned(),
    });
    text
}
