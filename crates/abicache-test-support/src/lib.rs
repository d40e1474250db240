//! Test-only support for abicache's integration tests (a dev-dependency,
//! never published): the servers the remote-cache tests run against, each
//! started on a free loopback port and killed when dropped, and visible skips.
//!
//! - [`free_port`]: a loopback port nothing listens on (at the time of asking).
//! - [`Server::redis`]: Debian's `redis-server`, without persistence.
//! - [`Server::s3`]: moto's S3 server run by a given Python, with a bucket
//!   [`S3_BUCKET`].
//!
//! Both servers are installed by `scripts/setup-services.sh`; a missing one
//! fails the test with a message naming that script.
//!
//! - [`skip`]: a test that cannot run here says so where the run's summary
//!   lists it, and fails instead under `ABICACHE_TEST_NO_SKIPS=1`;
//!   [`skip_for_hardware`] and [`skip_for_privilege`] are the skips allowed
//!   there (no set-up can install a GPU or grant `mount`).
//! - [`write()`]: a file of a test's project, parents created; [`tree`] and
//!   [`make_read_only`]: a tree's state, to show nothing wrote to it.
//! - [`venv_python`], [`repo_root`]: the project's venvs and repository.
//! - `environment::cpython312` (feature `key`): a hand-built environment.
//! - [`alone_in_process`]: a test that changes process-wide state (the
//!   current directory, a variable) runs in a process of its own, under
//!   `cargo test` too.
//!
//! ```
//! let mut redis = abicache_test_support::Server::redis();
//! let port = redis.port();
//! assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
//! redis.stop();
//! assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
//! ```

#![deny(missing_docs)]

#[cfg(feature = "key")]
pub mod environment;
mod files;
mod process;
mod server;
mod skip;
mod venv;

pub use files::{assert_generated_file, copy_dir, make_read_only, tree, write, PathState};
pub use process::alone_in_process;
pub use server::{free_port, Server, S3_BUCKET};
pub use skip::{
    skip, skip_for_hardware, skip_for_privilege, HARDWARE, NO_SKIPS_VAR, PRIVILEGE, SKIP_LOG_VAR,
};
pub use venv::{repo_root, venv_python};
