//! virtio-user's socket handling against plain Unix sockets of the test's
//! own (no vhost-user peer needed): `server=1` never removes a socket that
//! something listens on, and control errors name their real cause
//! (issue 21).
use rpmd_pmd::Registry;
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

fn registry() -> Registry {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    reg
}

fn path(tag: &str) -> String {
    let p = format!("/tmp/rpmd-sock-{tag}-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&p);
    p
}

fn open_err(dev: &str) -> String {
    match registry().open(dev) {
        Ok(_) => panic!("{dev}: opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn server_mode_leaves_a_live_servers_socket_alone() {
    let p = path("live");
    let live = UnixListener::bind(&p).unwrap();
    let e = open_err(&format!("virtio-user:{p},server=1,timeout_ms=200"));
    assert!(e.contains("another program is listening on"), "{e}");
    // The other server's socket is still there and still reaches it (the
    // probe's connection is waiting in its backlog, then this one).
    assert!(std::fs::symlink_metadata(&p).is_ok());
    live.set_nonblocking(true).unwrap();
    let _probe = live.accept().unwrap();
    let _c = UnixStream::connect(&p).unwrap();
    assert!(live.accept().is_ok());
    drop(live);
    let _ = std::fs::remove_file(&p);
}

#[test]
fn server_mode_replaces_a_stale_socket_and_refuses_other_files() {
    let p = path("stale");
    drop(UnixListener::bind(&p).unwrap());
    assert!(std::fs::symlink_metadata(&p).is_ok(), "the file stays");
    let e = open_err(&format!("virtio-user:{p},server=1,timeout_ms=100"));
    assert!(e.contains("no vhost-user backend connected"), "{e}");
    assert!(
        std::fs::symlink_metadata(&p).is_err(),
        "our socket went with the port"
    );
    std::fs::write(&p, b"not a socket").unwrap();
    let e = open_err(&format!("virtio-user:{p},server=1,timeout_ms=100"));
    assert!(e.contains("is not a socket (a file)"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"not a socket");
    let _ = std::fs::remove_file(&p);
}

/// A backend that hangs up at once and one that never answers: only the
/// second is reported as a timeout.
#[test]
fn control_errors_name_their_cause() {
    let p = path("hangup");
    let l = UnixListener::bind(&p).unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        // Read SET_OWNER's header, then hang up.
        let mut h = [0u8; 12];
        let _ = s.read_exact(&mut h);
    });
    let start = Instant::now();
    let e = open_err(&format!("virtio-user:{p},timeout_ms=3000"));
    t.join().unwrap();
    assert!(!e.contains("no reply within"), "{e}");
    assert!(e.contains("vhost-user"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2), "failed at once");
    let _ = std::fs::remove_file(&p);

    let p = path("silent");
    let l = UnixListener::bind(&p).unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        // Take every request and answer none, until the port gives up.
        let mut b = [0u8; 256];
        while s.read(&mut b).is_ok_and(|n| n > 0) {}
    });
    let e = open_err(&format!("virtio-user:{p},timeout_ms=300"));
    t.join().unwrap();
    assert!(e.contains("GET_FEATURES: no reply within 300ms"), "{e}");
    let _ = std::fs::remove_file(&p);
}

/// Issue 20: errors keep their source: a socket that is not there fails
/// with the OS error behind it reachable through `source()`, not only
/// flattened into the message.
#[test]
fn errors_keep_their_source() {
    use std::error::Error as _;
    let e = registry()
        .open("virtio-user:/nonexistent/rpmd.sock")
        .err()
        .expect("no socket there");
    let io = e
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("the io::Error is the source");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("/nonexistent/rpmd.sock"), "{e}");
    // A queue size the ring rejects keeps the ring's error.
    let e = registry()
        .open("virtio-user:/x.sock,queue_size=100")
        .err()
        .expect("refused");
    let ring = e
        .source()
        .and_then(|s| s.downcast_ref::<rpmd_virtio::Error>())
        .expect("the ring's error is the source");
    assert!(matches!(ring, rpmd_virtio::Error::Config(_)), "{ring:?}");
}
