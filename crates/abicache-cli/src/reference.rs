//! The documentation site's command-line reference (`docs/reference/cli.md`),
//! generated from the clap definition in `args.rs`: one section per command
//! and subcommand with its about text and its full `--help`, rendered at a
//! fixed width and without colour so the page is the same on every machine.

use clap::{ColorChoice, Command, CommandFactory};

use crate::args::Cli;

/// The command that writes [`cli_reference`] to where the documentation site
/// has it (run from the repository root).
pub const CLI_REFERENCE_COMMAND: &str =
    "cargo run -p abicache-cli --example cli_reference > docs/reference/cli.md";

/// Where [`CLI_REFERENCE_COMMAND`] writes the page, from the repository root.
pub const CLI_REFERENCE_PATH: &str = "docs/reference/cli.md";

/// The width the help text is wrapped at (the terminal's is never asked).
const WIDTH: usize = 100;

/// The command-line reference page: a generated-file header, a table of the
/// commands, then for each command (depth first, as clap lists them; hidden
/// ones and clap's `help` left out) a heading, its about text and its long
/// help in a code block. A test fails when the committed page differs.
pub fn cli_reference() -> String {
    let mut root = Cli::command()
        .term_width(WIDTH)
        .max_term_width(WIDTH)
        .color(ColorChoice::Never);
    root.build();
    let mut commands = Vec::new();
    collect(&root, root.get_name().to_string(), &mut commands);

    let mut out = format!(
        "<!-- Generated from clap (crates/abicache-cli/src/args.rs): do not edit.\n     \
         Regenerate: {CLI_REFERENCE_COMMAND} -->\n\n"
    );
    out.push_str(
        "# Command line\n\n\
         Every `abicache` command with its full `--help`. The spec and environment files the \
         commands take are described in [CLI and spec format](../cli.md); the environment \
         variables in [Environment variables](env-vars.md). Exit codes: 0 success, 1 a failed \
         build, 2 bad input or an ABI refusal, with the reason on stderr.\n\n\
         | command | what it does |\n|---|---|\n",
    );
    for (path, command) in &commands[1..] {
        out.push_str(&format!(
            "| [`{path}`](#{}) | {} |\n",
            path.replace(' ', "-"),
            one_line(&about(command))
        ));
    }
    for (path, command) in &commands {
        let mut command = command.clone().term_width(WIDTH).max_term_width(WIDTH);
        let help = command.render_long_help().to_string();
        out.push_str(&format!(
            "\n## {path}\n\n{}\n\n```text\n",
            one_line(&about(&command))
        ));
        for line in help.trim_end().lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str("```\n");
    }
    out
}

/// `command` and its visible subcommands, depth first, each with its full
/// name (`abicache key`).
fn collect(command: &Command, path: String, out: &mut Vec<(String, Command)>) {
    out.push((path.clone(), command.clone()));
    for sub in command.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        collect(sub, format!("{path} {}", sub.get_name()), out);
    }
}

/// The command's about text (the long one when it has one).
fn about(command: &Command) -> String {
    command
        .get_long_about()
        .or_else(|| command.get_about())
        .map(|about| about.to_string())
        .unwrap_or_default()
}

/// `text` with its line breaks made spaces (a table cell, a paragraph).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
