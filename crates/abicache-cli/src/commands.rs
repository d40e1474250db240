//! One function per subcommand: call the façade, print the result.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use abicache::build::{progress_reporter, ProgressMode};
use abicache::key::{Environment, ExtensionSpec, SpecFile};
use abicache::settings::Settings;
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

/// Runs the parsed command line with the `settings` resolved from the
/// environment, the config file and its flags (`--cache-dir`, `--remote`).
pub fn run(cli: Cli, settings: Arc<Settings>) -> Result<()> {
    let verbose = cli.verbose;
    let s = settings;
    match cli.command {
        Command::Scan(args) => scan(&s, args),
        Command::Key(args) => key(&s, verbose, args),
        Command::Build(args) => build(&s, verbose, args),
        Command::Ls(args) => ls(&s, args),
        Command::Explain(args) => explain(&s, verbose, args),
        Command::Gc(args) => gc(&s, args),
        Command::Rm(args) => rm(&s, args),
        Command::Stats(args) => stats(&s, args),
        Command::Audit(args) => audit(args),
        Command::Misses(args) => crate::misses_cmd::misses(&s, args),
        Command::Push(args) => crate::remote_cmds::push(open_store(&s)?, &s, args),
        Command::Pull(args) => crate::remote_cmds::pull(open_store(&s)?, &s, args),
        Command::Keygen(args) => crate::remote_cmds::keygen(args),
        Command::Prebuild(args) => crate::fleet_cmds::prebuild(open_store(&s)?, &s, args),
        Command::Export(args) => crate::fleet_cmds::export(open_store(&s)?, &s, args),
        Command::Import(args) => crate::fleet_cmds::import(open_store(&s)?, &s, args),
        // `main_with_package` runs them (`run` needs the package directory;
        // `config` resolves no settings).
        Command::Run(_) | Command::Config(_) => {
            unreachable!("`abicache run` and `config` are dispatched by main_with_package")
        }
    }
}

/// The cache the settings name, serving pulled entries only when signed by
/// one of their trusted keys.
pub(crate) fn open_store(settings: &Settings) -> Result<Store, Error> {
    Ok(Store::open_configured(&settings.store)?
        .with_trusted_signers(abicache::trusted_signers(&settings.remote)))
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
    settings: &Arc<Settings>,
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
        settings,
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
    settings: &Arc<Settings>,
    env_file: Option<&Path>,
    python: Option<&Path>,
) -> Result<(Session, Option<interpreter::Chosen>)> {
    if let Some(path) = env_file {
        let env = Environment::load(path).map_err(Error::from)?;
        let session = Session::open_lazily(None, env).with_settings(Arc::clone(settings));
        return Ok((session, None));
    }
    let chosen = interpreter::choose(python)?;
    let probe_cache = probe_cache_dir(settings)?;
    let probed = probe_interpreter(&chosen.path, probe_cache.as_deref())?;
    let session = Session::open_lazily(None, probed.environment)
        .with_settings(Arc::clone(settings))
        .with_site_packages(probed.site_packages);
    Ok((session, Some(chosen)))
}

/// Where interpreter probes are remembered: inside the cache, and only once
/// the cache exists (probing never creates it; see [`Session::validate_spec`]).
fn probe_cache_dir(settings: &Settings) -> Result<Option<PathBuf>, Error> {
    let root = settings
        .store
        .root
        .clone()
        .ok_or(abicache::store::StoreError::NoCacheDir)?;
    let version_dir = Layout::new(root).version_dir().to_path_buf();
    Ok(version_dir
        .is_dir()
        .then(|| version_dir.join("interpreters")))
}

/// `abicache scan`: the sources as one extension with the `-I` and `-D`
/// given, configured by the rule keying uses ([`ExtensionSpec::scan_config`]);
/// with `--python` or `--env` in that environment, as `abicache key` scans.
/// Opens no cache.
fn scan(settings: &Arc<Settings>, args: ScanArgs) -> Result<()> {
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
        let (session, _) = environment_session(settings, env_file, python)?;
        session.scan_config(&sources, &root)?
    } else {
        sources.scan_config(None, &root)
    };
    let report = abicache::scan::scan(&sources.sources, &config).map_err(Error::from)?;
    print_json_or(args.json, &render::scan_json(&report), || {
        abicache::scan::render_summary(&report)
    })
}

fn key(settings: &Arc<Settings>, verbose: bool, args: KeyArgs) -> Result<()> {
    let SpecSession {
        file,
        name,
        session,
        ..
    } = session_for(settings, &args.spec, SessionOptions::default(), verbose)?;
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

fn build(settings: &Arc<Settings>, verbose: bool, args: BuildArgs) -> Result<()> {
    let options = SessionOptions {
        rebuild: args.rebuild,
        jobs: args.jobs,
    };
    let SpecSession {
        file,
        name,
        session,
        ..
    } = session_for(settings, &args.spec, options, verbose)?;
    let session = session
        .with_remote(crate::remote_cmds::remote_for_build(
            settings,
            args.no_upload,
        ))
        .with_build_command(build_command(&args.spec, &name));
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let mode = if args.quiet {
        ProgressMode::Quiet
    } else {
        ProgressMode::Auto
    };
    let progress = progress_reporter(mode);
    let outcome = session.build(spec, &file.root, &progress)?;
    if verbose {
        for line in &outcome.one_shot {
            eprintln!("{line}");
        }
    }
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
    }
    // The GPU guard, as before a load: a library no visible GPU can run is
    // an ABI refusal (exit 2) here, not a kernel launch failure later. It
    // stays in the cache (another machine's GPUs may run it).
    let gpu = outcome.check_gpu()?;
    if let (true, Some(jit)) = (verbose, gpu.jit) {
        eprintln!("note: {jit}");
    }
    print_json_or(args.spec.json, &outcome, || {
        format!("{}\n", outcome.path.display())
    })
}

/// The `abicache build` command line that builds extension `name` of
/// `spec` where compiling is allowed (what an offline miss names).
fn build_command(spec: &SpecArgs, name: &str) -> String {
    let mut words = vec![
        "abicache".to_owned(),
        "build".to_owned(),
        spec.spec.display().to_string(),
        "--extension".to_owned(),
        name.to_owned(),
    ];
    if let Some(env) = &spec.env.env {
        words.extend(["--env".to_owned(), env.display().to_string()]);
    }
    if let Some(python) = &spec.env.python {
        words.extend(["--python".to_owned(), python.display().to_string()]);
    }
    let quoted: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
    format!("`{}`", quoted.join(" "))
}

/// `word` as a POSIX shell reads it back: as it is when it holds only
/// safe characters, else in single quotes.
fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:+@%,".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn explain(settings: &Arc<Settings>, verbose: bool, args: SpecArgs) -> Result<()> {
    let SpecSession {
        file,
        name,
        session,
        interpreter,
    } = session_for(settings, &args, SessionOptions::default(), verbose)?;
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let prepared = session.prepare(spec, &file.root)?;
    let explanation = session.explain(&prepared)?;
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

fn ls(settings: &Settings, args: JsonArgs) -> Result<()> {
    let store = open_store(settings)?;
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

fn gc(settings: &Settings, args: GcArgs) -> Result<()> {
    let max = parse_size(&args.max_size).map_err(Error::from)?;
    let store = open_store(settings)?;
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

fn rm(settings: &Settings, args: RmArgs) -> Result<()> {
    let store = open_store(settings)?;
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

fn stats(settings: &Settings, args: StatsArgs) -> Result<()> {
    let store = open_store(settings)?;
    if args.zero {
        store.zero_counters().map_err(Error::from)?;
    }
    let stats = store.stats().map_err(Error::from)?;
    print_json_or(args.json, &stats, || {
        render::stats_human(&stats, store.root())
    })
}

/// `abicache audit --json`: the audit's report plus the device-code images
/// the library carries (absent for a library without device code).
#[derive(serde::Serialize)]
struct AuditOutput<'a> {
    #[serde(flatten)]
    report: &'a abicache::audit::AuditReport,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    device_images: Vec<String>,
}

fn audit(args: AuditArgs) -> Result<()> {
    let library = Path::new(&args.library);
    let report = abicache::audit::audit_file(library).map_err(Error::from)?;
    let mut images = abicache::fatbin::images_in_elf(library).map_err(Error::from)?;
    images.sort_unstable();
    images.dedup();
    let output = AuditOutput {
        report: &report,
        device_images: images.iter().map(ToString::to_string).collect(),
    };
    print_json_or(args.json, &output, || {
        let mut text = abicache::audit::render_human(&report);
        text.push_str(&render::device_images_line(&output.device_images));
        text
    })
}
