//! Build progress: the events [`crate::build`] emits and a renderer for them.
//!
//! Events are delivered on the thread that called [`crate::build`], in order:
//! one `Started`, one `UnitDone` per compiled unit, `Linking`, `Finished`.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// One step of a build.
///
/// Serialises as an object tagged by `kind` (`started`, `unit_done`,
/// `linking`, `finished`) with the variant's fields beside it: the shape
/// Python progress callbacks receive (plus the event's [`plain_line`] as `line`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Progress {
    /// Compilation starts: `total` units, of which `cached` are reused from the object cache.
    Started {
        /// The extension name.
        name: String,
        /// All units of the plan.
        total: usize,
        /// Units whose object was already cached.
        cached: usize,
        /// How long the previous build of this extension took, if known.
        estimate: Option<f64>,
        /// Set when memory, not the cores, set how many compiles run at
        /// once: `2 jobs (memory: 7.1 GiB free by MemAvailable, ~3.2 GiB
        /// per nvcc unit, measured)` (see `abicache_build::memory`).
        memory_bound: Option<String>,
    },
    /// A unit finished compiling; `done` counts cached units too.
    UnitDone {
        /// Units done so far (cached included).
        done: usize,
        /// All units.
        total: usize,
        /// The unit's display path.
        source: String,
        /// Seconds its compiler ran.
        seconds: f64,
    },
    /// All objects exist; the library is being linked.
    Linking,
    /// The library is built.
    Finished {
        /// Seconds since `Started`.
        seconds: f64,
    },
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on a terminal, plain lines otherwise (decided from stderr; a
    /// `TERM=dumb` terminal gets plain lines too). The bar has colour unless
    /// `NO_COLOR` is set.
    Auto,
    /// An `indicatif` bar on stderr.
    Bar,
    /// One line per event on stderr.
    Plain,
    /// Nothing.
    Quiet,
}

/// The event as JSON: its [`Progress`] serialisation plus its [`plain_line`]
/// as `line` (what a Python progress callback receives, as a dict).
pub fn progress_json(event: &Progress) -> serde_json::Result<serde_json::Value> {
    let mut value = serde_json::to_value(event)?;
    if let Some(fields) = value.as_object_mut() {
        fields.insert("line".to_string(), plain_line(event).into());
    }
    Ok(value)
}

/// The plain-text line for an event (what [`ProgressMode::Plain`] prints).
pub fn plain_line(event: &Progress) -> String {
    match event {
        Progress::Started {
            name,
            total,
            cached,
            estimate,
            memory_bound,
        } => {
            let mut line = format!(
                "building `{name}`: {total} unit{}",
                if *total == 1 { "" } else { "s" }
            );
            if *cached > 0 {
                line.push_str(&format!(", {cached} cached"));
            }
            if let Some(est) = estimate {
                line.push_str(&format!(" (last build took {est:.1}s)"));
            }
            if let Some(bound) = memory_bound {
                line.push_str(&format!("; {bound}"));
            }
            line
        }
        Progress::UnitDone {
            done,
            total,
            source,
            seconds,
        } => {
            format!("[{done}/{total}] compiled {source} ({seconds:.1}s)")
        }
        Progress::Linking => "linking".to_string(),
        Progress::Finished { seconds } => format!("built in {seconds:.1}s"),
    }
}

/// A progress callback for [`crate::build`] that renders events as `mode` says.
pub fn progress_reporter(mode: ProgressMode) -> impl Fn(Progress) {
    let mode = match mode {
        ProgressMode::Auto => auto_mode(
            std::io::stderr().is_terminal(),
            abicache_env_vars::var(abicache_env_vars::TERM).as_deref(),
        ),
        other => other,
    };
    let bar: RefCell<Option<ProgressBar>> = RefCell::new(None);
    move |event: Progress| match mode {
        ProgressMode::Quiet => {}
        ProgressMode::Plain | ProgressMode::Auto => eprintln!("{}", plain_line(&event)),
        ProgressMode::Bar => render_bar(&bar, event),
    }
}

/// What [`ProgressMode::Auto`] means for a stderr that is (not) a terminal of type `term`.
fn auto_mode(stderr_is_terminal: bool, term: Option<&str>) -> ProgressMode {
    if stderr_is_terminal && term != Some("dumb") {
        ProgressMode::Bar
    } else {
        ProgressMode::Plain
    }
}

/// The bar's template: coloured, or plain when `NO_COLOR` is set (<https://no-color.org>).
fn bar_template(colour: bool) -> &'static str {
    if colour {
        "{prefix:.bold} [{elapsed}] {bar:30.cyan/blue} {pos}/{len} (eta {eta_est}) {msg:.dim}"
    } else {
        "{prefix} [{elapsed}] {bar:30} {pos}/{len} (eta {eta_est}) {msg}"
    }
}

/// A bar of `len` units at `pos`, prefixed with the extension's `name`; its ETA is what is
/// left of `estimate` (the last build's seconds) when known.
fn start_bar(name: &str, len: usize, pos: usize, estimate: Option<f64>) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    // With the last build's duration, the ETA is what is left of it; without, the
    // rate-based guess of indicatif.
    let eta = move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let left = match estimate {
            Some(est) => (est - state.elapsed().as_secs_f64()).max(0.0),
            None => state.eta().as_secs_f64(),
        };
        let _ = write!(w, "{left:.0}s");
    };
    let no_color = abicache_env_vars::var(abicache_env_vars::NO_COLOR).is_some();
    let template = bar_template(!no_color);
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.with_key("eta_est", eta));
    }
    pb.set_prefix(format!("building {name}"));
    pb.set_position(pos as u64);
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

fn render_bar(bar: &RefCell<Option<ProgressBar>>, event: Progress) {
    let mut slot = bar.borrow_mut();
    match event {
        Progress::Started {
            name,
            total: len,
            cached: pos,
            estimate,
            memory_bound,
        } => {
            if let Some(bound) = memory_bound {
                eprintln!("building {name}: {bound}");
            }
            *slot = Some(start_bar(&name, len, pos, estimate));
        }
        Progress::UnitDone { done, source, .. } => {
            if let Some(pb) = slot.as_ref() {
                pb.set_position(done as u64);
                pb.set_message(source);
            }
        }
        Progress::Linking => {
            if let Some(pb) = slot.as_ref() {
                pb.set_message("linking");
            }
        }
        Progress::Finished { seconds } => {
            if let Some(pb) = slot.take() {
                pb.finish_and_clear();
            }
            eprintln!("{}", plain_line(&Progress::Finished { seconds }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_only_on_a_real_terminal() {
        assert_eq!(auto_mode(true, Some("xterm-256color")), ProgressMode::Bar);
        assert_eq!(auto_mode(true, None), ProgressMode::Bar);
        assert_eq!(auto_mode(true, Some("dumb")), ProgressMode::Plain);
        assert_eq!(auto_mode(false, Some("xterm")), ProgressMode::Plain);
    }

    #[test]
    fn no_color_template_has_no_styles_and_both_templates_parse() {
        assert!(!bar_template(false).contains(".cyan") && !bar_template(false).contains(".bold"));
        assert!(bar_template(true).contains(".cyan"));
        for colour in [true, false] {
            assert!(ProgressStyle::with_template(bar_template(colour)).is_ok());
        }
    }
}
