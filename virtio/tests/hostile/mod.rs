//! A hostile vhost-user backend of the project's own, for regression tests
//! of the virtio-user port (issue 21): the message layer is rust-vmm's
//! `vhost` crate (its backend side), and a device thread plays the rings
//! in the memory the port shares, well for a while and then as a
//! [`Misbehave`] says. It listens on a socket and serves one connection
//! at a time; only the first connection misbehaves, so a port that drops
//! a backend it stopped trusting finds a well-behaved one when it
//! reconnects.
//!
//! RX (vring 0): every posted buffer gets a frame: the 12-byte net
//! header, then 60 bytes whose first 8 are a sequence number, so a test
//! can tell frames the device wrote from stale buffers. TX (vring 1):
//! buffers are taken and completed.
#![allow(dead_code, unsafe_code)]

use rpmd_virtio::vring::{split_sizes, PackedView, SplitView};
use std::fs::File;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vhost::vhost_user::message::*;
use vhost::vhost_user::{Backend, BackendReqHandler, Error, GpuBackend};
use vhost::vhost_user::{VhostUserBackendReqHandlerMut, VhostUserProtocolFeatures};
use vhost::VhostUserMemoryRegionBase;

type Result<T> = std::result::Result<T, Error>;

/// What the device does wrong, once `after` good RX frames were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misbehave {
    /// Nothing.
    Nothing,
    /// TX: rewrites the NEXT links of each posted chain into a self-loop
    /// before completing it (split rings).
    RewriteLinks,
    /// RX: moves the used index 1000 ahead of what it completed.
    JumpUsedIndex,
    /// RX: completes a buffer naming an out-of-range id.
    OutOfRangeId,
    /// RX: completes the same buffer twice in a row.
    DuplicateId,
    /// RX: completes eight buffers in a row (whole lines of four and
    /// more) with lengths past their ends: four with the posted length
    /// plus one, then four with the largest a descriptor holds.
    OverlongLength,
    /// RX: completes eight buffers in a row with lengths too short for a
    /// net header and an Ethernet header: 0, the net header alone, and
    /// up to 13 bytes after it.
    ShortLength,
}

/// The backend's setup.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub packed: bool,
    pub in_order: bool,
    pub act: Misbehave,
    pub after: u64,
    /// Offer MQ with the CONFIG protocol feature, and this many queue
    /// pairs in the device config's max_virtqueue_pairs.
    pub max_pairs: Option<u16>,
    /// Offer CONFIGURE_MEM_SLOTS (ADD_MEM_REG, REM_MEM_REG), and REPLY_ACK
    /// with it if `reply_ack`.
    pub mem_slots: bool,
    pub reply_ack: bool,
    /// Offer MRG_RXBUF (each frame still in one buffer).
    pub mrg: bool,
}

/// Counts the device keeps, for the test to compare with the port's.
#[derive(Default)]
pub struct Counts {
    pub connections: AtomicU64,
    /// Good RX frames written (sequence numbers 0..this).
    pub rx_written: AtomicU64,
    /// Misbehaviours carried out.
    pub misbehaved: AtomicU64,
    /// TX buffers completed.
    pub tx_done: AtomicU64,
    /// TX buffers outside every region the frontend shared.
    pub tx_unmapped: AtomicU64,
    /// Regions added by ADD_MEM_REG, and removed by REM_MEM_REG.
    pub regions_added: AtomicU64,
    pub regions_removed: AtomicU64,
}

/// A running hostile backend; stops on drop.
pub struct Hostile {
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: String,
}

impl Hostile {
    /// Listens on `path` and serves connections as `setup` says.
    pub fn start(path: &str, setup: Setup) -> Hostile {
        let _ = std::fs::remove_file(path);
        let l = UnixListener::bind(path).expect("hostile backend socket");
        l.set_nonblocking(true).unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        let thread = std::thread::spawn(move || serve(l, setup, c, s));
        Hostile {
            counts,
            stop,
            thread: Some(thread),
            path: path.to_string(),
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(l: UnixListener, setup: Setup, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let mut first = true;
    while !stop.load(Ordering::Relaxed) {
        let Ok((sock, _)) = l.accept() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        sock.set_nonblocking(false).unwrap();
        counts.connections.fetch_add(1, Ordering::Relaxed);
        let setup = Setup {
            act: if first { setup.act } else { Misbehave::Nothing },
            ..setup
        };
        first = false;
        let state = Arc::new(Mutex::new(State::new(setup, counts.clone())));
        let mut h = BackendReqHandler::from_stream(sock, state.clone());
        let closer = h.try_clone_connection().unwrap();
        let gone = Arc::new(AtomicBool::new(false));
        let g = gone.clone();
        let msgs = std::thread::spawn(move || {
            while h.handle_request().is_ok() {}
            g.store(true, Ordering::Relaxed);
        });
        // Sequence numbers go on across connections.
        let mut dev = Device {
            seq: counts.rx_written.load(Ordering::Relaxed),
            ..Device::default()
        };
        while !gone.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            let busy = dev.step(&state, &setup, &counts);
            if !busy {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let _ = closer.shutdown(std::net::Shutdown::Both);
        let _ = msgs.join();
    }
}

/// A region of the frontend's memory, mapped here from its fd.
struct Region {
    user: u64,
    len: u64,
    map: memmap2::MmapRaw,
}

#[derive(Clone, Copy, Default)]
struct VringCfg {
    num: u16,
    desc: u64,
    avail: u64,
    used: u64,
    base: u16,
    running: bool,
}

/// What the messages set up.
struct State {
    setup: Setup,
    counts: Arc<Counts>,
    regions: Vec<Region>,
    vrings: [VringCfg; 2],
    /// Bumped when the rings are (re)programmed, so the device starts over.
    generation: u64,
}

impl State {
    fn new(setup: Setup, counts: Arc<Counts>) -> State {
        State {
            setup,
            counts,
            regions: Vec::new(),
            vrings: [VringCfg::default(); 2],
            generation: 0,
        }
    }

    /// A pointer to `len` bytes at the frontend's user address `a`, if a
    /// mapped region holds them.
    fn at(&self, a: u64, len: u64) -> Option<*mut u8> {
        self.regions.iter().find_map(|r| {
            (a >= r.user && a.checked_add(len)? <= r.user + r.len)
                // SAFETY: inside the mapping (checked just above).
                .then(|| unsafe { r.map.as_mut_ptr().add((a - r.user) as usize) })
        })
    }
}

/// The device's own position in each ring.
#[derive(Default)]
struct Device {
    generation: u64,
    next_avail: [u16; 2],
    used_idx: [u16; 2],
    wrap: [bool; 2],
    seq: u64,
    done_misbehaving: bool,
    /// Overlong lengths written so far.
    overlong: u32,
}

const F_AVAIL: u16 = 1 << 7;
const F_USED: u16 = 1 << 15;
const F_NEXT: u16 = 1;

impl Device {
    /// One pass over both rings; whether anything was done.
    fn step(&mut self, state: &Mutex<State>, setup: &Setup, counts: &Counts) -> bool {
        let st = state.lock().unwrap();
        if st.generation != self.generation {
            self.generation = st.generation;
            for i in 0..2 {
                self.next_avail[i] = st.vrings[i].base & 0x7fff;
                self.used_idx[i] = st.vrings[i].base & 0x7fff;
                self.wrap[i] = setup.packed;
                if setup.packed {
                    self.wrap[i] = st.vrings[i].base & 0x8000 != 0;
                }
            }
        }
        if !st.vrings.iter().all(|v| v.running) {
            return false;
        }
        let (rx, tx) = if setup.packed {
            (
                self.packed_rx(&st, setup, counts),
                self.packed_tx(&st, 1, counts),
            )
        } else {
            (
                self.split_rx(&st, setup, counts),
                self.split_tx(&st, setup, counts),
            )
        };
        rx || tx
    }

    fn misbehave_now(&self, setup: &Setup, counts: &Counts, act: Misbehave) -> bool {
        setup.act == act
            && !self.done_misbehaving
            && counts.rx_written.load(Ordering::Relaxed) >= setup.after
    }

    /// The length to complete an RX buffer of `room` bytes with, holding
    /// a frame of `len`: `len`, or under `OverlongLength` one past the
    /// buffer, under `ShortLength` too short for the headers (the frame
    /// is then not counted as written).
    fn rx_len(&mut self, setup: &Setup, counts: &Counts, room: u32, len: u32) -> u32 {
        let short = self.misbehave_now(setup, counts, Misbehave::ShortLength);
        if !short && !self.misbehave_now(setup, counts, Misbehave::OverlongLength) {
            return len;
        }
        self.overlong += 1;
        self.done_misbehaving = self.overlong == 8;
        counts.misbehaved.fetch_add(1, Ordering::Relaxed);
        match (short, self.overlong) {
            (true, k) => [0, 12, 13, 16, 20, 24, 25, 12 + 13][k as usize - 1],
            (false, 1..=4) => room.saturating_add(1),
            (false, _) => u32::MAX,
        }
    }

    /// Writes frame `seq` into the buffer at `addr` (`room` bytes).
    fn write_frame(st: &State, addr: u64, room: u32, seq: u64) -> Option<u32> {
        let len = 12 + 60;
        if room < len {
            return None;
        }
        let p = st.at(addr, len as u64)?;
        let mut f = [0u8; 72];
        // num_buffers: 1 (§5.1.6.4, with or without MRG_RXBUF).
        f[10] = 1;
        f[12..20].copy_from_slice(&seq.to_le_bytes());
        // SAFETY: `len` bytes of a mapped region (checked by `at`).
        unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), p, f.len()) };
        Some(len)
    }

    fn split_rx(&mut self, st: &State, setup: &Setup, counts: &Counts) -> bool {
        if self.done_misbehaving && setup.act == Misbehave::JumpUsedIndex {
            // A broken device: it stopped after the jump.
            return false;
        }
        let Some(v) = Self::split_view(st, 0) else {
            return false;
        };
        // Indices through atomics, entries volatile, as a device does.
        let avail_idx = v.avail_idx(Ordering::Acquire);
        let mut did = false;
        while self.next_avail[0] != avail_idx {
            let head = v.avail_entry(self.next_avail[0]);
            self.next_avail[0] = self.next_avail[0].wrapping_add(1);
            let d = v.desc(head);
            let Some(len) = Self::write_frame(st, d.addr, d.len, self.seq) else {
                continue;
            };
            let mut entries = vec![(head as u32, len)];
            let bad_len = self.rx_len(setup, counts, d.len, len);
            if bad_len != len {
                entries[0].1 = bad_len;
            } else if self.misbehave_now(setup, counts, Misbehave::OutOfRangeId) {
                entries[0].0 = 9999;
                self.done_misbehaving = true;
                counts.misbehaved.fetch_add(1, Ordering::Relaxed);
            } else if self.misbehave_now(setup, counts, Misbehave::DuplicateId) {
                // A good completion, then the same buffer again.
                entries.push((head as u32, len));
                self.done_misbehaving = true;
                counts.misbehaved.fetch_add(1, Ordering::Relaxed);
                self.seq += 1;
                counts.rx_written.fetch_add(1, Ordering::Relaxed);
            } else {
                self.seq += 1;
                counts.rx_written.fetch_add(1, Ordering::Relaxed);
            }
            for (id, len) in entries {
                v.set_used_elem(self.used_idx[0], id, len);
                self.used_idx[0] = self.used_idx[0].wrapping_add(1);
            }
            v.set_used_idx(self.used_idx[0], Ordering::Release);
            did = true;
            if self.misbehave_now(setup, counts, Misbehave::JumpUsedIndex) {
                self.done_misbehaving = true;
                counts.misbehaved.fetch_add(1, Ordering::Relaxed);
                v.set_used_idx(self.used_idx[0].wrapping_add(1000), Ordering::Release);
                return true;
            }
        }
        did
    }

    /// Split vring `q`, if its descriptor table, avail and used rings are
    /// all mapped.
    fn split_view(st: &State, q: usize) -> Option<SplitView> {
        let v = st.vrings[q];
        let n = v.num;
        if !n.is_power_of_two() || v.desc % 16 != 0 || v.avail % 2 != 0 || v.used % 4 != 0 {
            return None;
        }
        let (d, a, u) = split_sizes(n);
        let (desc, avail, used) = (
            st.at(v.desc, d as u64)?,
            st.at(v.avail, a as u64)?,
            st.at(v.used, u as u64)?,
        );
        // SAFETY: the three parts lie in regions the frontend handed over
        // (checked by `at`), mapped while the state holds them, aligned
        // (checked above); only volatile and atomic accesses follow.
        Some(unsafe { SplitView::new(desc, avail, used, n) })
    }

    fn split_tx(&mut self, st: &State, setup: &Setup, counts: &Counts) -> bool {
        let Some(v) = Self::split_view(st, 1) else {
            return false;
        };
        let n = v.size();
        let avail_idx = v.avail_idx(Ordering::Acquire);
        let mut did = false;
        while self.next_avail[1] != avail_idx {
            let head = v.avail_entry(self.next_avail[1]);
            self.next_avail[1] = self.next_avail[1].wrapping_add(1);
            if setup.act == Misbehave::RewriteLinks {
                // Every descriptor of the chain now links to the head.
                let mut id = head;
                for _ in 0..n {
                    let d = v.desc(id);
                    if d.flags & F_NEXT == 0 {
                        break;
                    }
                    v.set_desc_link(id, d.flags, head);
                    counts.misbehaved.fetch_add(1, Ordering::Relaxed);
                    id = d.id_or_next;
                }
            }
            // Every buffer of the chain must be in the memory table.
            let mut id = head;
            for _ in 0..n {
                let d = v.desc(id);
                if st.at(d.addr, d.len as u64).is_none() {
                    counts.tx_unmapped.fetch_add(1, Ordering::Relaxed);
                }
                if d.flags & F_NEXT == 0 {
                    break;
                }
                id = d.id_or_next;
            }
            v.set_used_elem(self.used_idx[1], head as u32, 0);
            self.used_idx[1] = self.used_idx[1].wrapping_add(1);
            counts.tx_done.fetch_add(1, Ordering::Relaxed);
            did = true;
        }
        v.set_used_idx(self.used_idx[1], Ordering::Release);
        did
    }

    /// Packed vring `q`, if its descriptor ring is mapped (event areas
    /// are not used: the view points both at the ring's first word, which
    /// this device never reads or writes through them).
    fn packed_view(st: &State, q: usize) -> Option<PackedView> {
        let v = st.vrings[q];
        if v.num == 0 || v.desc % 16 != 0 {
            return None;
        }
        let ring = st.at(v.desc, 16 * v.num as u64)?;
        // SAFETY: the ring lies in a region the frontend handed over
        // (checked by `at`), 16-aligned; the event pointers are never used.
        Some(unsafe { PackedView::new(ring, ring, ring, v.num) })
    }

    /// Takes the available descriptor at ring `q`'s position, if any:
    /// its slot, address, length and id (single descriptors only).
    fn packed_take(&mut self, st: &State, q: usize) -> Option<(PackedView, u16, u64, u32, u16)> {
        let v = Self::packed_view(st, q)?;
        let slot = self.next_avail[q];
        // The flags atomically, the rest after.
        let f = v.flags(slot).load(Ordering::Acquire);
        let w = self.wrap[q];
        if (f & F_AVAIL != 0) != w || (f & F_USED != 0) == w {
            return None;
        }
        let (addr, len, id) = v.desc(slot);
        self.next_avail[q] += 1;
        if self.next_avail[q] == v.size() {
            self.next_avail[q] = 0;
            self.wrap[q] = !self.wrap[q];
        }
        Some((v, slot, addr, len, id))
    }

    /// Writes a used descriptor naming `id` at the slot just taken (in
    /// order of taking, so at the same position); the flags last, Release.
    fn packed_use(v: PackedView, slot: u16, id: u16, len: u32, wrap: bool) {
        v.set_used(slot, id, len);
        let f = if wrap { F_AVAIL | F_USED } else { 0 };
        v.flags(slot).store(f, Ordering::Release);
    }

    fn packed_rx(&mut self, st: &State, setup: &Setup, counts: &Counts) -> bool {
        let mut did = false;
        loop {
            let wrap = self.wrap[0];
            let Some((v, slot, addr, room, id)) = self.packed_take(st, 0) else {
                return did;
            };
            did = true;
            let Some(len) = Self::write_frame(st, addr, room, self.seq) else {
                continue;
            };
            let mut id = id;
            let bad_len = self.rx_len(setup, counts, room, len);
            if bad_len != len {
                Self::packed_use(v, slot, id, bad_len, wrap);
                continue;
            }
            if self.misbehave_now(setup, counts, Misbehave::OutOfRangeId) {
                id = 9999;
                self.done_misbehaving = true;
                counts.misbehaved.fetch_add(1, Ordering::Relaxed);
            } else if self.misbehave_now(setup, counts, Misbehave::DuplicateId) {
                // A good completion, then the same buffer again in the
                // next available slot.
                self.done_misbehaving = true;
                counts.misbehaved.fetch_add(1, Ordering::Relaxed);
                self.seq += 1;
                counts.rx_written.fetch_add(1, Ordering::Relaxed);
                Self::packed_use(v, slot, id, len, wrap);
                let next_wrap = self.wrap[0];
                if let Some((v, slot, ..)) = self.packed_take(st, 0) {
                    Self::packed_use(v, slot, id, len, next_wrap);
                }
                continue;
            } else {
                self.seq += 1;
                counts.rx_written.fetch_add(1, Ordering::Relaxed);
            }
            Self::packed_use(v, slot, id, len, wrap);
        }
    }

    fn packed_tx(&mut self, st: &State, q: usize, counts: &Counts) -> bool {
        let mut did = false;
        loop {
            let wrap = self.wrap[q];
            let Some((v, slot, _, _, id)) = self.packed_take(st, q) else {
                return did;
            };
            Self::packed_use(v, slot, id, 0, wrap);
            counts.tx_done.fetch_add(1, Ordering::Relaxed);
            did = true;
        }
    }
}

const VERSION_1: u64 = 1 << 32;
const RING_PACKED: u64 = 1 << 34;
const IN_ORDER: u64 = 1 << 35;
const MRG_RXBUF: u64 = 1 << 15;
const MQ: u64 = 1 << 22;
const PROTOCOL_FEATURES: u64 = 1 << 30;

fn refuse<T>() -> Result<T> {
    Err(Error::InvalidOperation(
        "not supported by the hostile backend",
    ))
}

impl VhostUserBackendReqHandlerMut for State {
    fn set_owner(&mut self) -> Result<()> {
        Ok(())
    }
    fn reset_owner(&mut self) -> Result<()> {
        Ok(())
    }
    fn reset_device(&mut self) -> Result<()> {
        Ok(())
    }
    fn get_features(&mut self) -> Result<u64> {
        let mut f = VERSION_1;
        if self.setup.packed {
            f |= RING_PACKED;
        }
        if self.setup.in_order {
            f |= IN_ORDER;
        }
        if self.setup.mrg {
            f |= MRG_RXBUF;
        }
        if self.setup.max_pairs.is_some() {
            f |= MQ | PROTOCOL_FEATURES;
        }
        if self.setup.mem_slots {
            f |= PROTOCOL_FEATURES;
        }
        Ok(f)
    }
    fn set_features(&mut self, _features: u64) -> Result<()> {
        Ok(())
    }
    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> Result<Option<Vec<VhostUserMemoryRegionBase>>> {
        self.regions.clear();
        for (r, f) in ctx.iter().zip(files) {
            let map = memmap2::MmapOptions::new()
                .offset(r.mmap_offset)
                .len(r.memory_size as usize)
                .map_raw(&f)
                .map_err(|_| Error::InvalidParam)?;
            self.regions.push(Region {
                user: r.user_addr,
                len: r.memory_size,
                map,
            });
        }
        Ok(None)
    }
    fn set_vring_num(&mut self, index: u32, num: u32) -> Result<()> {
        let v = self
            .vrings
            .get_mut(index as usize)
            .ok_or(Error::InvalidParam)?;
        v.num = num as u16;
        Ok(())
    }
    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> Result<()> {
        let v = self
            .vrings
            .get_mut(index as usize)
            .ok_or(Error::InvalidParam)?;
        (v.desc, v.used, v.avail) = (descriptor, used, available);
        Ok(())
    }
    fn set_vring_base(&mut self, index: u32, base: u32) -> Result<()> {
        let v = self
            .vrings
            .get_mut(index as usize)
            .ok_or(Error::InvalidParam)?;
        v.base = base as u16;
        Ok(())
    }
    fn get_vring_base(&mut self, index: u32) -> Result<VhostUserVringState> {
        let v = self
            .vrings
            .get_mut(index as usize)
            .ok_or(Error::InvalidParam)?;
        v.running = false;
        Ok(VhostUserVringState::new(index, 0))
    }
    fn set_vring_kick(&mut self, index: u8, _fd: Option<File>) -> Result<()> {
        let v = self
            .vrings
            .get_mut(index as usize)
            .ok_or(Error::InvalidParam)?;
        v.running = true;
        self.generation += 1;
        Ok(())
    }
    fn set_vring_call(&mut self, _index: u8, _fd: Option<File>) -> Result<()> {
        Ok(())
    }
    fn set_vring_err(&mut self, _index: u8, _fd: Option<File>) -> Result<()> {
        Ok(())
    }
    fn get_protocol_features(&mut self) -> Result<VhostUserProtocolFeatures> {
        let mut p = match self.setup.max_pairs {
            Some(_) => VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::CONFIG,
            None => VhostUserProtocolFeatures::empty(),
        };
        if self.setup.mem_slots {
            p |= VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS;
        }
        if self.setup.reply_ack {
            p |= VhostUserProtocolFeatures::REPLY_ACK;
        }
        Ok(p)
    }
    fn set_protocol_features(&mut self, _features: u64) -> Result<()> {
        Ok(())
    }
    fn get_queue_num(&mut self) -> Result<u64> {
        // As DPDK does: its maximum, whatever it serves.
        Ok(128)
    }
    fn set_vring_enable(&mut self, _index: u32, _enable: bool) -> Result<()> {
        Ok(())
    }
    fn get_config(&mut self, offset: u32, size: u32, _: VhostUserConfigFlags) -> Result<Vec<u8>> {
        let Some(pairs) = self.setup.max_pairs else {
            return refuse();
        };
        // virtio-net config: mac, status, max_virtqueue_pairs, mtu.
        let mut cfg = [0u8; 12];
        cfg[8..10].copy_from_slice(&pairs.to_le_bytes());
        let (o, n) = (offset as usize, size as usize);
        cfg.get(o..o + n)
            .map(<[u8]>::to_vec)
            .ok_or(Error::InvalidParam)
    }
    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> Result<()> {
        refuse()
    }
    fn set_backend_req_fd(&mut self, _backend: Backend) {}
    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> Result<()> {
        refuse()
    }
    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> Result<File> {
        refuse()
    }
    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> Result<(VhostUserInflight, File)> {
        refuse()
    }
    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _file: File) -> Result<()> {
        refuse()
    }
    fn get_max_mem_slots(&mut self) -> Result<u64> {
        Ok(8)
    }
    fn add_mem_region(
        &mut self,
        r: &VhostUserSingleMemoryRegion,
        fd: File,
        _: Option<bool>,
    ) -> Result<Option<VhostUserMemoryRegionBase>> {
        if !self.setup.mem_slots {
            return refuse();
        }
        let (user, len) = (r.user_addr, r.memory_size);
        if self
            .regions
            .iter()
            .any(|x| user < x.user + x.len && x.user < user + len)
        {
            return Err(Error::InvalidParam);
        }
        let map = memmap2::MmapOptions::new()
            .offset(r.mmap_offset)
            .len(len as usize)
            .map_raw(&fd)
            .map_err(|_| Error::InvalidParam)?;
        self.regions.push(Region { user, len, map });
        self.counts.regions_added.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }
    fn remove_mem_region(&mut self, r: &VhostUserSingleMemoryRegion) -> Result<()> {
        if !self.setup.mem_slots {
            return refuse();
        }
        let n = self.regions.len();
        self.regions.retain(|x| x.user != r.user_addr);
        if self.regions.len() == n {
            return Err(Error::InvalidParam);
        }
        self.counts.regions_removed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _fd: File,
    ) -> Result<Option<File>> {
        refuse()
    }
    fn check_device_state(&mut self) -> Result<()> {
        refuse()
    }
    fn get_shmem_config(&mut self) -> Result<VhostUserShMemConfig> {
        refuse()
    }
    fn set_log_base(&mut self, _: &VhostUserLog, _file: File) -> Result<()> {
        refuse()
    }
}
