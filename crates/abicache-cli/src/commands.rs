//! One function per subcommand: call the façade, print the result.

use std::path::{Path, PathBuf};

use abicache::build::{progress_reporter, ProgressMode};
use abicache::key::{Environment, ExtensionSpec, SpecFile};
use abicache::store::{parse_size, Layout, Store};
use abicache::{Error, Session, SessionOptions};
use abicache_fleet::probe_interpreter;
use anyhow::{Context, Result};

use crate::args::{
    AuditArgs, BuildArgs, Cli, Command, GcArgs, JsonArgs, KeyArgs, RmArgs, ScanArgs, SpecArgs,
    StatsArgs,
};
use crate::interpreter;
use crate::output::{emit, print_json, print_json_or};
use crate::render;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let cache_dir = cli.cache_dir;
    let remote = cli.remote;
    let verbose = cli.verbose;
    match cli.command {
        Command::Scan(args) => scan(cache_dir, args),
        Command::Key(args) => key(cache_dir, verbose, args),
        Command::Build(args) => build(cache_dir, remote.as_deref(), verbose, args),
        Command::Ls(args) => ls(cache_dir, args),
        Command::Explain(args) => explain(cache_dir, verbose, args),
        Command::Gc(args) => gc(cache_dir, args),
        Command::Rm(args) => rm(cache_dir, args),
        Command::Stats(args) => stats(cache_dir, args),
        Command::Audit(args) => audit(args),
        Command::Push(args) => {
            crate::remote_cmds::push(open_store(cache_dir)?, remote.as_deref(), args)
        }
        Command::Pull(args) => {
            crate::remote_cmds::pull(open_store(cache_dir)?, remote.as_deref(), args)
        }
        Command::Keygen(args) => crate::remote_cmds::keygen(args),
        Command::Config(args) => crate::config_cmd::config(cache_dir, remote.as_deref(), args),
        Command::Prebuild(args) => crate::fleet_cmds::prebuild(open_store(cache_dir)?, args),
        Command::Export(args) => crate::fleet_cmds::export(open_store(cache_dir)?, args),
        Command::Import(args) => crate::fleet_cmds::import(open_store(cache_dir)?, args),
        // `main_with_package` runs it (it needs the package directory).
        Command::Run(_) => unreachable!("`abicache run` is dispatched by main_with_package"),
    }
}

pub(crate) fn open_store(cache_dir: Option<PathBuf>) -> Result<Store, Error> {
    Ok(match cache_dir {
        Some(dir) => Store::open(dir)?,
        None => Store::open_default()?,
    }
    .with_trusted_signers(abicache::trusted_signers()))
}

/// What a spec argument resolves to: the spec file, the extension's name, a
/// session for its environment, and the interpreter probed for it (`None`
/// with `--env`).
struct SpecSession {
    file: SpecFile,
    name: String,
    session: Session,
    interpreter: Option<interpreter::Chosen>,
}

/// The extension a spec argument names, its fingerprint root, and a session
/// for the environment given by `--env` or `--python` (default: the active
/// venv, else `python3` on `PATH`; `verbose` prints which on stderr). The
/// cache is opened by the session when first needed, after its checks
/// ([`Session::validate_spec`]).
fn session_for(
    cache_dir: Option<PathBuf>,
    spec: &SpecArgs,
    options: SessionOptions,
    verbose: bool,
) -> Result<SpecSession> {
    let file = SpecFile::load(&spec.spec).map_err(Error::from)?;
    let name = file
        .extension(spec.extension.as_deref())
        .map_err(Error::from)?
        .name
        .clone();
    let (session, interpreter) = environment_session(
        cache_dir,
        spec.env.env.as_deref(),
        spec.env.python.as_deref(),
    )?;
    if let (true, Some(chosen)) = (verbose, &interpreter) {
        eprintln!("{}", chosen.describe());
    }
    Ok(SpecSession {
        file,
        name,
        session: session.with_options(options),
        interpreter,
    })
}

/// A session for the environment file `env_file`, else for the interpreter
/// `python` (neither: the default interpreter), and the interpreter chosen.
fn environment_session(
    cache_dir: Option<PathBuf>,
    env_file: Option<&Path>,
    python: Option<&Path>,
) -> Result<(Session, Option<interpreter::Chosen>)> {
    if let Some(path) = env_file {
        return Ok((
            Session::open_lazily(cache_dir, Environment::load(path).map_err(Error::from)?),
            None,
        ));
    }
    let chosen = interpreter::choose(python)?;
    let probe_cache = probe_cache_dir(cache_dir.as_deref())?;
    let probed = probe_interpreter(&chosen.path, probe_cache.as_deref())?;
    let session = Session::open_lazily(cache_dir, probed.environment)
        .with_site_packages(probed.site_packages);
    Ok((session, Some(chosen)))
}

/// Where interpreter probes are remembered: inside the cache, and only once
/// the cache exists (probing never creates it; see [`Session::validate_spec`]).
fn probe_cache_dir(cache_dir: Option<&Path>) -> Result<Option<PathBuf>, Error> {
    let root = match cache_dir {
        Some(dir) => dir.to_path_buf(),
        None => abicache::store::root_from_env()?,
    };
    let version_dir = Layout::new(root).version_dir().to_path_buf();
    Ok(version_dir
        .is_dir()
        .then(|| version_dir.join("interpreters")))
}

/// `abicache scan`: the sources as one extension with the `-I` and `-D`
/// given, configured by the rule keying uses ([`ExtensionSpec::scan_config`]);
/// with `--python` or `--env` in that environment, as `abicache key` scans.
/// Opens no cache.
fn scan(cache_dir: Option<PathBuf>, args: ScanArgs) -> Result<()> {
    let root = match args.root {
        Some(root) => root,
        None => std::env::current_dir()
            .context("cannot read the current directory; pass `--root DIR`")?,
    };
    let defines: Vec<String> = args.define.iter().map(|d| format!("-D{d}")).collect();
    let sources = ExtensionSpec::new("scan", args.sources)
        .with_extra_include_paths(args.include)
        .with_extra_cflags(defines);
    let (env_file, python) = (args.env.env.as_deref(), args.env.python.as_deref());
    let config = if env_file.is_some() || python.is_some() {
        let (session, _) = environment_session(cache_dir, env_file, python)?;
        session.scan_config(&sources, &root)?
    } else {
        sources.scan_config(None, &root)
    };
    let report = abicache::scan::scan(&sources.sources, &config).map_err(Error::from)?;
    print_json_or(args.json, &render::scan_json(&report), || {
        abicache::scan::render_summary(&report)
    })
}

fn key(cache_dir: Option<PathBuf>, verbose: bool, args: KeyArgs) -> Result<()> {
    let SpecSession {
        file,
        name,
        session,
        ..
    } = session_for(cache_dir, &args.spec, SessionOptions::default(), verbose)?;
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let json = args.spec.json;
    if !args.scan {
        if let Some(known) = session.remembered_key(spec, &file.root)? {
            if verbose {
                eprintln!(
                    "key: from the key memo (nothing the last scan read changed; `--scan` scans)"
                );
            }
            return print_json_or(
                json,
                &render::key_json(&name, &known.key, &known.payload),
                || render::key_human(&name, &known.key, &known.payload),
            );
        }
    }
    let keyed = session.prepare(spec, &file.root)?.keyed;
    print_json_or(
        json,
        &render::key_json(&name, &keyed.key, &keyed.payload),
        || render::key_human(&name, &keyed.key, &keyed.payload),
    )
}

fn build(
    cache_dir: Option<PathBuf>,
    remote: Option<&str>,
    verbose: bool,
    args: BuildArgs,
) -> Result<()> {
    let options = SessionOptions {
        rebuild: args.rebuild,
        jobs: args.jobs,
    };
    let SpecSession {
        file,
        name,
        session,
        ..
    } = session_for(cache_dir, &args.spec, options, verbose)?;
    let session = session.with_remote(crate::remote_cmds::remote_for_build(remote, args.no_upload));
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let mode = if args.quiet {
        ProgressMode::Quiet
    } else {
        ProgressMode::Auto
    };
    let progress = progress_reporter(mode);
    let outcome = session.build(spec, &file.root, &progress)?;
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
    }
    print_json_or(args.spec.json, &outcome, || {
        format!("{}\n", outcome.path.display())
    })
}

fn explain(cache_dir: Option<PathBuf>, verbose: bool, args: SpecArgs) -> Result<()> {
    let SpecSession {
        file,
        name,
        session,
        interpreter,
    } = session_for(cache_dir, &args, SessionOptions::default(), verbose)?;
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let prepared = session.prepare(spec, &file.root)?;
    let explanation = abicache::explain(&session, &prepared)?;
    if args.json {
        return print_json(&explanation);
    }
    let mut text = abicache::render_explanation(&explanation);
    // A default interpreter is named, so the user sees which venv was meant.
    if let Some(chosen) = interpreter.filter(|c| c.source != interpreter::Source::Flag) {
        text.push_str(&chosen.describe());
        text.push('\n');
    }
    emit(&text)
}

fn ls(cache_dir: Option<PathBuf>, args: JsonArgs) -> Result<()> {
    let store = open_store(cache_dir)?;
    let entries = store.list().map_err(Error::from)?;
    let json: Vec<_> = entries.iter().map(render::entry_json).collect();
    print_json_or(args.json, &json, || render::entries_human(&entries))
}

/// `abicache gc --json`: the store's report plus the key memos removed.
#[derive(serde::Serialize)]
struct GcOutput<'a> {
    #[serde(flatten)]
    report: &'a abicache::store::GcReport,
    key_memos_removed: usize,
}

fn gc(cache_dir: Option<PathBuf>, args: GcArgs) -> Result<()> {
    let max = parse_size(&args.max_size).map_err(Error::from)?;
    let store = open_store(cache_dir)?;
    let report = store.gc(max).map_err(Error::from)?;
    // Key memos that can no longer answer (the façade's, not the store's).
    let memos = abicache::key_memos(&store).remove_stale(store.gc_grace());
    let json = GcOutput {
        report: &report,
        key_memos_removed: memos,
    };
    print_json_or(args.json, &json, || {
        let mut text = render::gc_human(&report);
        if memos > 0 {
            let s = if memos == 1 { "" } else { "s" };
            text.push_str(&format!("  {memos} stale key memo{s} removed\n"));
        }
        text
    })
}

fn rm(cache_dir: Option<PathBuf>, args: RmArgs) -> Result<()> {
    let store = open_store(cache_dir)?;
    let removed = store.remove(&args.target).map_err(Error::from)?;
    if args.json {
        return print_json(&serde_json::json!({ "removed": removed }));
    }
    if removed == 0 {
        eprintln!(
            "no entry named or keyed `{}` (see `abicache ls`)",
            args.target
        );
    } else {
        emit(&format!(
            "removed {removed} entr{}\n",
            if removed == 1 { "y" } else { "ies" }
        ))?;
    }
    Ok(())
}

fn stats(cache_dir: Option<PathBuf>, args: StatsArgs) -> Result<()> {
    let store = open_store(cache_dir)?;
    if args.zero {
        store.zero_counters().map_err(Error::from)?;
    }
    let stats = store.stats().map_err(Error::from)?;
    print_json_or(args.json, &stats, || {
        render::stats_human(&stats, store.root())
    })
}

fn audit(args: AuditArgs) -> Result<()> {
    let report = abicache::audit::audit_file(Path::new(&args.library)).map_err(Error::from)?;
    print_json_or(args.json, &report, || {
        abicache::audit::render_human(&report)
    })
}
