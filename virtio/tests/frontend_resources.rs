//! What a vhost-user frontend hands the backend besides its messages, and
//! how its messages arrive: the eventfds the data path writes (a call fd
//! must never stop an lcore), the memory it maps (a file shrunk under the
//! mapping must cost the frontend its connection, not the process), a
//! message's body in more than one piece, the packed ring's 32-bit base,
//! the same region added once per queue pair (QEMU's `mq=on`), and
//! refusals that name the request. After each case a good frontend is
//! served and every mbuf is back in its pool.
mod common;
mod frontend;

use frontend::*;
use std::os::fd::{AsFd, FromRawFd};

const SET_FEATURES: u32 = 2;
const SET_OWNER: u32 = 3;
const V1: u32 = 1;

/// A frame the hostile guest sends on its TX ring's entry `k` reaches the
/// backend's rx.
fn guest_sends(b: &mut Backend, g: &Guest, k: u16, tag: u32) {
    let v = g.view(TX_RING);
    let f = tx_frame(g, k as usize * 2048, tag, 100);
    v.set_desc(
        k,
        DescFields {
            addr: f.0,
            len: f.1,
            flags: 0,
            id_or_next: 0,
        },
    );
    v.set_avail_entry(k, k);
    v.set_avail_idx(k + 1, Ordering::Release);
    let mut p = Pkts::new();
    let t = Instant::now();
    while p.is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "frame {tag} not received; last error {:?}",
            b.port.last_error()
        );
        b.q.rx_burst(0, &mut p, 32);
    }
    assert_eq!(p[0].data(), &common::frame(tag, 100)[..]);
}

#[test]
fn a_kick_or_call_fd_that_is_no_eventfd_is_refused() {
    let mut b = backend("fdkind");
    let mut fds = [0; 2];
    // SAFETY: a valid array of two fds for pipe() to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the pipe's ends are ours; each goes into one owner.
    let (r, w) = unsafe { (EventFd::from_raw_fd(fds[0]), EventFd::from_raw_fd(fds[1])) };
    refused(&mut b, 1, "SET_VRING_CALL 0: fd is pipe:", |g| {
        g.handshake();
        let _ = g.fe.set_vring_call(0, &w);
        let _ = g.fe.get_features();
    });
    refused(&mut b, 2, "SET_VRING_KICK 1: fd is pipe:", |g| {
        g.handshake();
        let _ = g.fe.set_vring_kick(1, &r);
        let _ = g.fe.get_features();
    });
    // The reason stays after the good frontend came and went.
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains("not an eventfd"), "{e}");
    finish(b);
}

/// A frontend whose call eventfd is blocking and one short of its limit:
/// writing a call into it would block the lcore until the frontend reads
/// (and forever once it leaves). The backend's write does not block, the
/// call is counted lost, and frames keep going.
#[test]
fn a_call_eventfd_at_its_limit_does_not_stop_the_lcore() {
    let mut b = backend("callfull");
    let mut g = Guest::connect(&b.sock);
    g.call[0] = EventFd::new(0).unwrap(); // blocking
    g.call[0].write(u64::MAX - 1).unwrap();
    g.handshake();
    g.ring(0, RX_RING).unwrap();
    g.ring(1, TX_RING).unwrap();
    // If the write blocked, this read (after 10 s) would free it, and the
    // time taken would show it.
    let unblock = g.call[0].try_clone().unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rescuer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !done.load(Ordering::Acquire) && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !done.load(Ordering::Acquire) {
                let _ = unblock.read();
            }
        })
    };
    let v = g.view(RX_RING);
    let buf = g.base() + BUFS as u64;
    for k in 0..4u16 {
        v.set_desc(
            k,
            DescFields {
                addr: buf + k as u64 * 2048,
                len: 2048,
                flags: F_WRITE,
                id_or_next: 0,
            },
        );
        v.set_avail_entry(k, k);
    }
    v.set_avail_idx(4, Ordering::Release);
    let t = Instant::now();
    let mut p = Pkts::new();
    for i in 0..4 {
        let mut m = b.pool.get().unwrap();
        m.append(100)
            .unwrap()
            .copy_from_slice(&common::frame(i, 100));
        p.push(m).unwrap();
        while !p.is_empty() {
            b.q.tx_burst(0, &mut p);
        }
    }
    let took = t.elapsed();
    done.store(true, Ordering::Release);
    rescuer.join().unwrap();
    assert!(took < Duration::from_secs(5), "tx_burst blocked {took:?}");
    assert_eq!(v.used_idx(Ordering::Acquire), 4);
    assert!(xstat(&b.port, "tx_q0_calls_lost") >= 1);
    // The other direction still runs.
    guest_sends(&mut b, &g, 0, 77);
    drop(g);
    good_frontend_works(&mut b);
    finish(b);
}

/// A frontend that truncates its memfd under the backend's mapping: the
/// backend's next access faults, the process lives on, the frontend is
/// dropped naming the region, and the next frontend is served.
#[test]
fn a_frontend_that_shrinks_its_memory_loses_its_connection_not_the_process() {
    let mut b = backend("shrink");
    let mut g = Guest::connect(&b.sock);
    g.handshake();
    g.ring(0, RX_RING).unwrap();
    g.ring(1, TX_RING).unwrap();
    guest_sends(&mut b, &g, 0, 1);
    let file = std::fs::File::from(g.mem.fd().try_clone_to_owned().unwrap());
    file.set_len(0).unwrap();
    // The backend touches the TX ring at its next rx_burst.
    let mut p = Pkts::new();
    let t = Instant::now();
    while xstat(&b.port, "frontends_rejected") == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "still connected");
        b.q.rx_burst(0, &mut p, 32);
        std::thread::sleep(Duration::from_millis(1));
    }
    p.clear();
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains("was made shorter under our mapping"), "{e}");
    // Our own mapping of the file must not be touched from here on.
    std::mem::forget(g);
    good_frontend_works(&mut b);
    finish(b);
}

/// A memfd that allows seals is sealed against shrinking when the backend
/// maps it: its frontend can no longer truncate it.
#[test]
fn a_sealable_memfd_cannot_be_shrunk_once_mapped() {
    let b = backend("seal");
    // SAFETY: a valid NUL-terminated name; the fd returned is ours.
    let fd = unsafe {
        libc::memfd_create(
            c"rpmd-seal-test".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    assert!(fd >= 0);
    // SAFETY: a fresh fd nothing else owns.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.set_len(1 << 20).unwrap();
    let g = Guest::connect(&b.sock);
    g.fe.set_owner().unwrap();
    g.fe.set_features(VERSION_1).unwrap();
    let r = VhostUserMemoryRegionInfo {
        guest_phys_addr: 0,
        memory_size: 1 << 20,
        userspace_addr: 0x1000_0000,
        mmap_offset: 0,
        mmap_handle: f.as_fd().as_raw_fd(),
    };
    g.fe.set_mem_table(&[r]).unwrap();
    g.fe.get_features().unwrap(); // the table was handled
    let e = f.set_len(4096).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    f.set_len(2 << 20).unwrap();
    drop(g);
    finish(b);
}

/// A request whose body comes in two writes is one request; one whose
/// body never comes whole is refused naming what was missing.
#[test]
fn a_message_in_pieces_is_read_whole() {
    const GET_FEATURES: u32 = 1;
    let mut b = backend("pieces");
    let mut s = UnixStream::connect(&b.sock).unwrap();
    request(&mut s, SET_OWNER, V1, &[], false);
    let mut m = header(SET_FEATURES, 8);
    m.extend_from_slice(&VERSION_1.to_le_bytes());
    for part in [&m[..6], &m[6..16], &m[16..]] {
        s.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
    let (code, _, features) = request(&mut s, GET_FEATURES, V1, &[], true).unwrap();
    assert_eq!(code, GET_FEATURES);
    assert_ne!(features, 0);
    assert_eq!(xstat(&b.port, "negotiated_features"), VERSION_1);
    assert_eq!(xstat(&b.port, "frontends_rejected"), 0);
    // Half a body, then the frontend goes.
    s.write_all(&m[..16]).unwrap();
    drop(s);
    wait_xstat(&b, "frontends_rejected", 1);
    let e = b.port.last_error().unwrap_or_default();
    assert!(
        e.contains("SET_FEATURES: 4 of its 8 body bytes, then nothing"),
        "{e}"
    );
    good_frontend_works(&mut b);
    finish(b);
}

/// QEMU's packed ring base: the available position and wrap counter in
/// the low half, the used ones in the high half (0x80008000 for a new
/// ring). It is taken, and given back in the same form.
#[test]
fn a_packed_rings_base_is_32_bits() {
    const SET_VRING_NUM: u32 = 8;
    const SET_VRING_BASE: u32 = 10;
    const GET_VRING_BASE: u32 = 11;
    const PACKED: u64 = 1 << 34;
    let mut b = backend("pbase");
    let pair = |index: u32, num: u32| [index.to_le_bytes(), num.to_le_bytes()].concat();
    let mut s = UnixStream::connect(&b.sock).unwrap();
    request(&mut s, SET_OWNER, V1, &[], false);
    let f = VERSION_1 | PACKED;
    request(&mut s, SET_FEATURES, V1, &f.to_le_bytes(), false);
    request(&mut s, SET_VRING_NUM, V1, &pair(0, 256), false);
    request(&mut s, SET_VRING_BASE, V1, &pair(0, 0x8000_8000), false);
    let (code, _, state) = request(&mut s, GET_VRING_BASE, V1, &pair(0, 0), true).unwrap();
    assert_eq!(code, GET_VRING_BASE);
    assert_eq!(state >> 32, 0x8000_8000, "{state:#x}");
    assert_eq!(xstat(&b.port, "frontends_rejected"), 0);
    drop(s);
    // A split ring's base stays 16-bit.
    let mut s = UnixStream::connect(&b.sock).unwrap();
    request(&mut s, SET_OWNER, V1, &[], false);
    request(&mut s, SET_FEATURES, V1, &VERSION_1.to_le_bytes(), false);
    request(&mut s, SET_VRING_BASE, V1, &pair(0, 0x8000_8000), false);
    wait_xstat(&b, "frontends_rejected", 1);
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains("a split ring's is 16-bit"), "{e}");
    drop(s);
    good_frontend_works(&mut b);
    finish(b);
}

/// QEMU with `mq=on` adds its regions once per queue pair (ADD_MEM_REG
/// with the same region and file): each is counted, not refused as an
/// overlap, and the region stays mapped until its last removal.
#[test]
fn the_same_region_added_again_is_counted_not_refused() {
    use vhost::vhost_user::message::VhostUserProtocolFeatures as P;
    use vhost::vhost_user::VhostUserFrontend;
    const PROTOCOL_FEATURES: u64 = 1 << 30;
    let mut b = backend("dupreg");
    let mut g = Guest::connect(&b.sock);
    g.fe.set_owner().unwrap();
    g.fe.get_features().unwrap();
    g.fe.set_features(VERSION_1 | PROTOCOL_FEATURES).unwrap();
    g.fe.get_protocol_features().unwrap();
    g.fe.set_protocol_features(P::CONFIGURE_MEM_SLOTS | P::MQ)
        .unwrap();
    let r = g.region(0, 1 << 20, g.base());
    for _ in 0..4 {
        g.fe.add_mem_region(&r).unwrap();
    }
    g.ring(0, RX_RING).unwrap();
    g.ring(1, TX_RING).unwrap();
    for i in 0..2 {
        g.fe.set_vring_enable(i, true).unwrap();
    }
    guest_sends(&mut b, &g, 0, 5);
    for _ in 0..3 {
        g.fe.remove_mem_region(&r).unwrap();
    }
    guest_sends(&mut b, &g, 1, 6);
    assert_eq!(xstat(&b.port, "frontends_rejected"), 0);
    drop(g);
    wait_link_down_then_good(&mut b);
    finish(b);
}

/// A request refused for a protocol feature that was not negotiated, or
/// one the protocol does not have, is named in the error.
#[test]
fn refusals_name_the_request() {
    const GET_SHARED_OBJECT: u32 = 41;
    let mut b = backend("names");
    let mut s = UnixStream::connect(&b.sock).unwrap();
    request(&mut s, SET_OWNER, V1, &[], false);
    request(&mut s, GET_SHARED_OBJECT, V1, &[0; 16], false);
    wait_xstat(&b, "frontends_rejected", 1);
    let e = b.port.last_error().unwrap_or_default();
    assert!(
        e.contains("GET_SHARED_OBJECT: needs protocol feature") && e.contains("SHARED_OBJECT"),
        "{e}"
    );
    drop(s);
    let mut s = UnixStream::connect(&b.sock).unwrap();
    request(&mut s, 999, V1, &[0; 8], false);
    wait_xstat(&b, "frontends_rejected", 2);
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains("unknown request 999"), "{e}");
    drop(s);
    good_frontend_works(&mut b);
    finish(b);
}
