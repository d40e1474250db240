//! Server processes on loopback ports, for tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket [`Server::s3`] creates.
pub const S3_BUCKET: &str = "abicache-test";

/// How long a server may take to listen (moto imports boto on start).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A loopback port that nothing listened on when asked (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("cannot bind a loopback port")
        .local_addr()
        .expect("a bound socket has an address")
        .port()
}

/// A server process on `127.0.0.1`, killed (and reaped) when dropped or
/// [`stop`](Server::stop)ped; its working directory is removed with it.
pub struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    /// `redis-server` on a free port, saving nothing to disk. Panics, naming
    /// `scripts/setup-services.sh`, when it is not installed or does not listen.
    pub fn redis() -> Server {
        let dir = tempfile::tempdir().expect("cannot create a temporary directory");
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("`redis-server` is not installed; run `scripts/setup-services.sh`");
        Server::listening(child, port, dir, "redis-server")
    }

    /// moto's S3 server (`python -m moto.server`) on a free port, with the
    /// bucket [`S3_BUCKET`] created. `python` must have `moto[server]`
    /// (the dev venv has it; `scripts/setup-services.sh` installs it).
    pub fn s3(python: &Path) -> Server {
        let dir = tempfile::tempdir().expect("cannot create a temporary directory");
        let port = free_port();
        let child = Command::new(python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `{}`: {e}", python.display()));
        let what = "moto.server (`moto[server]` in `.venv`; run `scripts/setup-services.sh`)";
        let server = Server::listening(child, port, dir, what);
        server.create_bucket(S3_BUCKET);
        server
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server and waits for it; a second call does nothing.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `child` once it accepts connections on `port`; panics naming `what`
    /// if it exits first or does not listen within [`START_TIMEOUT`].
    fn listening(mut child: Child, port: u16, dir: tempfile::TempDir, what: &str) -> Server {
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().expect("cannot poll the server process") {
                panic!("{what} exited ({status}) before listening on port {port}; run `scripts/setup-services.sh`");
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} did not listen on port {port} within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Server {
            child,
            port,
            _dir: dir,
        }
    }

    /// Creates `bucket` with a bare S3 `PUT /bucket` request.
    fn create_bucket(&self, bucket: &str) {
        let port = self.port;
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the server listens");
        write!(
            stream,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .expect("cannot send the bucket request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .expect("cannot read the bucket response");
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "creating the bucket `{bucket}` failed:\n{response}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
