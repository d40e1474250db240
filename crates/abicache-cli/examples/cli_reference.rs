//! Prints the documentation site's command-line reference, generated from
//! clap:
//!
//! ```sh
//! cargo run -p abicache-cli --example cli_reference > docs/reference/cli.md
//! ```

fn main() {
    print!("{}", abicache_cli::cli_reference());
}
