//! The model's data path: transmit descriptors read and written back
//! through its IOMMU when TDT moves, and received frames written into
//! the receive ring as the 82576 writes them (datasheet §7.1, §7.2).
use super::{Hostile, IgbModel, State};
use crate::regs::*;
use rpmd_pmd::net::{fold, ipv4_header_checksum, ones_sum, pseudo_header_sum};

/// The 16 bytes of descriptor `i` of the ring at `base`, or a violation.
fn read_desc(m: &IgbModel, s: &mut State, base: u64, i: u32) -> Option<[u8; 16]> {
    let mut d = [0u8; 16];
    let at = base + 16 * i as u64;
    if m.iommu.read(at, &mut d) {
        return Some(d);
    }
    IgbModel::violation(s, format!("descriptor read at {at:#x}: not mapped"));
    None
}

fn le32(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn le64(d: &[u8], at: usize) -> u64 {
    le32(d, at) as u64 | (le32(d, at + 4) as u64) << 32
}

/// A ring's base and length in descriptors, from its registers.
fn ring(s: &State, bal: u64, bah: u64, len: u64) -> (u64, u32) {
    let base = IgbModel::reg(s, bal) as u64 | (IgbModel::reg(s, bah) as u64) << 32;
    (base, IgbModel::reg(s, len) / 16)
}

/// Sends what transmit queue `q` holds between TDH and TDT.
pub(super) fn transmit(m: &IgbModel, s: &mut State, q: u16) {
    let on =
        IgbModel::reg(s, TCTL) & TCTL_EN != 0 && IgbModel::reg(s, txdctl(q)) & DCTL_ENABLE != 0;
    let (base, n) = ring(s, tdbal(q), tdbah(q), tdlen(q));
    if !on || n == 0 {
        return;
    }
    let tail = IgbModel::reg(s, tdt(q)) % n;
    let mut head = IgbModel::reg(s, tdh(q)) % n;
    while head != tail {
        let Some(d) = read_desc(m, s, base, head) else {
            break;
        };
        let cmd = le32(&d, 8);
        if cmd & ADVTXD_DCMD_DEXT != 0 && cmd & (0xf << 20) == ADVTXD_DTYP_CTXT {
            s.tx_ctx = (le32(&d, 0), le32(&d, 8), le32(&d, 12));
        } else if cmd & ADVTXD_DCMD_DEXT != 0 && cmd & (0xf << 20) == ADVTXD_DTYP_DATA {
            gather(m, s, &d);
        } else {
            IgbModel::violation(
                s,
                format!("tx descriptor {head} of queue {q}: type {cmd:#x}"),
            );
        }
        if cmd & ADVTXD_DCMD_RS != 0 {
            let mut wb = d;
            wb[12..16].copy_from_slice(&(le32(&d, 12) | TXD_STAT_DD).to_le_bytes());
            let at = base + 16 * head as u64;
            if !m.iommu.write(at, &wb) {
                IgbModel::violation(s, format!("tx write-back at {at:#x}: not mapped"));
            }
        }
        head = (head + 1) % n;
    }
    s.regs.insert(tdh(q), head);
}

/// One data descriptor's segment; the frame goes out at EOP.
fn gather(m: &IgbModel, s: &mut State, d: &[u8; 16]) {
    let (addr, cmd, olinfo) = (le64(d, 0), le32(d, 8), le32(d, 12));
    let len = (cmd & 0xffff) as usize;
    let mut seg = vec![0u8; len];
    if !m.iommu.read(addr, &mut seg) {
        IgbModel::violation(
            s,
            format!("tx buffer read at {addr:#x} ({len} bytes): not mapped"),
        );
        s.tx_frame.clear();
        return;
    }
    s.tx_frame.extend_from_slice(&seg);
    if cmd & ADVTXD_DCMD_EOP == 0 {
        return;
    }
    let mut f = std::mem::take(&mut s.tx_frame);
    let frames = if cmd & ADVTXD_DCMD_TSE != 0 {
        segment(&f, s.tx_ctx)
    } else {
        offload(&mut f, s.tx_ctx, cmd, olinfo);
        vec![f]
    };
    for f in frames {
        IgbModel::count(s, GPTC, 1);
        IgbModel::count(s, VFGPTC, 1);
        if m.opts.loopback {
            if m.receive_locked(s, 0, &f) {
                m.interrupt_rx(s, 0);
            }
        } else {
            s.sent.push_back(f);
        }
    }
}

/// TCP segmentation of an IPv4 frame as the context describes it: the
/// payload cut into MSS-sized pieces, each behind a copy of the headers
/// with its IP length and identification, sequence number and flags
/// (FIN and PSH on the last only) and both checksums made right.
fn segment(f: &[u8], ctx: (u32, u32, u32)) -> Vec<Vec<u8>> {
    let (lens, _, mss_l4) = ctx;
    let l2 = (lens >> ADVTXD_MACLEN_SHIFT & 0x7f) as usize;
    let l3 = (lens & 0x1ff) as usize;
    let l4 = (mss_l4 >> ADVTXD_L4LEN_SHIFT & 0xff) as usize;
    let mss = (mss_l4 >> ADVTXD_MSS_SHIFT) as usize;
    let h = l2 + l3 + l4;
    if mss == 0 || f.len() <= h || l3 < 20 || l4 < 20 {
        return Vec::new();
    }
    let be16 = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    let id0 = be16(&f[l2 + 4..]);
    let seq0 = u32::from_be_bytes([
        f[l2 + l3 + 4],
        f[l2 + l3 + 5],
        f[l2 + l3 + 6],
        f[l2 + l3 + 7],
    ]);
    let pieces: Vec<&[u8]> = f[h..].chunks(mss).collect();
    let last = pieces.len() - 1;
    let mut out = Vec::new();
    for (k, piece) in pieces.into_iter().enumerate() {
        let mut g = f[..h].to_vec();
        g.extend_from_slice(piece);
        let ip = l2;
        g[ip + 2..ip + 4].copy_from_slice(&((l3 + l4 + piece.len()) as u16).to_be_bytes());
        g[ip + 4..ip + 6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
        g[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
        let c = ipv4_header_checksum(&g[ip..ip + l3]);
        g[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        let tcp = ip + l3;
        let seq = seq0.wrapping_add((k * mss) as u32);
        g[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if k != last {
            g[tcp + 13] &= !0x09;
        }
        g[tcp + 16..tcp + 18].copy_from_slice(&[0, 0]);
        let ph = pseudo_header_sum(&g[ip..ip + l3]).unwrap_or(0) as u32;
        let c = !fold(ones_sum(&g[tcp..], ph));
        g[tcp + 16..tcp + 18].copy_from_slice(&c.to_be_bytes());
        out.push(g);
    }
    out
}

/// The frame's offloads: checksums (computed whole, as QEMU's model
/// does) and the VLAN tag from the context.
fn offload(f: &mut Vec<u8>, ctx: (u32, u32, u32), cmd: u32, olinfo: u32) {
    let (lens, _, _) = ctx;
    let l2 = (lens >> ADVTXD_MACLEN_SHIFT & 0x7f) as usize;
    let l3 = (lens & 0x1ff) as usize;
    if olinfo & ADVTXD_POPTS_IXSM != 0 && f.len() >= l2 + l3 && l3 >= 20 {
        f[l2 + 10..l2 + 12].copy_from_slice(&[0, 0]);
        let c = ipv4_header_checksum(&f[l2..l2 + l3]);
        f[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
    }
    if olinfo & ADVTXD_POPTS_TXSM != 0 && f.len() > l2 + l3 + 8 {
        let field = if f[l2 + 9] == 6 { 16 } else { 6 };
        let at = l2 + l3 + field;
        if at + 2 <= f.len() {
            f[at..at + 2].copy_from_slice(&[0, 0]);
            let ph = pseudo_header_sum(&f[l2..l2 + l3]).unwrap_or(0) as u32;
            let c = !fold(ones_sum(&f[l2 + l3..], ph));
            f[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
    if cmd & ADVTXD_DCMD_VLE != 0 && f.len() >= 12 {
        let tci = (lens >> ADVTXD_VLAN_SHIFT) as u16;
        let mut tag = vec![0x81, 0x00];
        tag.extend_from_slice(&tci.to_be_bytes());
        f.splice(12..12, tag);
    }
}

impl IgbModel {
    /// Whether the filter admits a frame to `dst`.
    fn admits(s: &State, dst: &[u8]) -> bool {
        let rctl = IgbModel::reg(s, RCTL);
        let multicast = dst[0] & 1 == 1;
        if dst == [0xff; 6] {
            return rctl & RCTL_BAM != 0;
        }
        if rctl & RCTL_UPE != 0 && !multicast || rctl & RCTL_MPE != 0 && multicast {
            return true;
        }
        let listed = (0..RAR_ENTRIES).any(|k| {
            let hi = IgbModel::reg(s, RAH0 + 8 * k);
            let lo = IgbModel::reg(s, RAL0 + 8 * k);
            let mut a = [0u8; 6];
            a[..4].copy_from_slice(&lo.to_le_bytes());
            a[4..].copy_from_slice(&(hi as u16).to_le_bytes());
            hi & RAH_AV != 0 && a == dst
        });
        let hash = ((dst[4] as u32) >> 4 | (dst[5] as u32) << 4) & 0xfff;
        let in_mta = IgbModel::reg(s, MTA + 4 * (hash >> 5) as u64) & 1 << (hash & 31) != 0;
        listed || multicast && in_mta
    }

    /// [`receive_on`](IgbModel::receive_on) with the state held.
    pub(super) fn receive_locked(&self, s: &mut State, q: u16, frame: &[u8]) -> bool {
        let on =
            IgbModel::reg(s, RCTL) & RCTL_EN != 0 && IgbModel::reg(s, rxdctl(q)) & DCTL_ENABLE != 0;
        if !on || frame.len() < 14 || !Self::admits(s, &frame[..6]) {
            return false;
        }
        let (base, n) = ring(s, rdbal(q), rdbah(q), rdlen(q));
        let buf = ((IgbModel::reg(s, srrctl(q)) & 0x7f) as usize) << SRRCTL_BSIZEPKT_SHIFT;
        let (f, vlan) = strip_vlan(s, frame);
        let need = f.len().div_ceil(buf.max(1)) as u32;
        let (head, tail) = (IgbModel::reg(s, rdh(q)), IgbModel::reg(s, rdt(q)));
        let free = if n == 0 { 0 } else { (tail + n - head) % n };
        if buf == 0 || free < need {
            IgbModel::count(s, MPC, 1);
            return false;
        }
        let status = rx_status(s, &f, vlan.is_some());
        let mut at = head;
        for (k, chunk) in f.chunks(buf).enumerate() {
            let Some(d) = read_desc(self, s, base, at) else {
                return false;
            };
            let addr = le64(&d, 0);
            if !self.iommu.write(addr, chunk) {
                IgbModel::violation(s, format!("rx buffer write at {addr:#x}: not mapped"));
            }
            let last = k as u32 + 1 == need;
            let wb = self.write_back(chunk.len(), status, last, vlan.unwrap_or(0));
            if !self.iommu.write(base + 16 * at as u64, &wb) {
                IgbModel::violation(s, format!("rx write-back at {at}: not mapped"));
            }
            at = (at + 1) % n;
        }
        s.regs.insert(rdh(q), at);
        IgbModel::count(s, GPRC, 1);
        IgbModel::count(s, VFGPRC, 1);
        true
    }

    /// A receive descriptor's write-back, broken as the options say.
    fn write_back(&self, len: usize, status: u32, last: bool, vlan: u16) -> [u8; 16] {
        let mut st = RXD_STAT_DD | status;
        let mut len = len as u16;
        if last {
            st |= RXD_STAT_EOP;
        }
        match self.opts.hostile {
            Some(Hostile::LengthBeyondBuffer) => len = u16::MAX,
            Some(Hostile::NeverEndOfPacket) => st &= !RXD_STAT_EOP,
            Some(Hostile::FrameError) => st |= 1 << 24,
            None => {}
        }
        let mut wb = [0u8; 16];
        wb[8..12].copy_from_slice(&st.to_le_bytes());
        wb[12..14].copy_from_slice(&len.to_le_bytes());
        wb[14..16].copy_from_slice(&vlan.to_le_bytes());
        wb
    }
}

/// The frame as the device stores it: without its 802.1Q tag when
/// CTRL.VME strips it, and the tag's TCI.
fn strip_vlan(s: &State, f: &[u8]) -> (Vec<u8>, Option<u16>) {
    let tagged = f.len() >= 18 && f[12..14] == [0x81, 0x00];
    if tagged && IgbModel::reg(s, CTRL) & CTRL_VME != 0 {
        let mut v = f[..12].to_vec();
        v.extend_from_slice(&f[16..]);
        return (v, Some(u16::from_be_bytes([f[14], f[15]])));
    }
    (f.to_vec(), None)
}

/// The checksum and VLAN status bits of a received IPv4 frame.
fn rx_status(s: &State, f: &[u8], stripped: bool) -> u32 {
    let mut st = if stripped { RXD_STAT_VP } else { 0 };
    let rxcsum = IgbModel::reg(s, RXCSUM);
    if f.len() < 34 || f[12..14] != [8, 0] {
        return st;
    }
    let ihl = (f[14] & 0xf) as usize * 4;
    let ip = &f[14..(14 + ihl).min(f.len())];
    if rxcsum & RXCSUM_IPOFLD != 0 {
        st |= RXD_STAT_IPCS;
        if ipv4_header_checksum(ip) != u16::from_be_bytes([f[24], f[25]]) {
            st |= RXDEXT_STATERR_IPE;
        }
    }
    let proto = f[23];
    let end = (14 + u16::from_be_bytes([f[16], f[17]]) as usize).min(f.len());
    let Some(l4) = f.get(14 + ihl..end) else {
        return st;
    };
    // UDP's checksum 0 means none: nothing to verify.
    let none = proto == 17 && l4.get(6..8) == Some(&[0, 0]);
    if rxcsum & RXCSUM_TUOFLD != 0 && (proto == 6 || proto == 17) && l4.len() >= 8 && !none {
        st |= RXD_STAT_L4CS | if proto == 17 { RXD_STAT_UDPCS } else { 0 };
        let ph = pseudo_header_sum(ip).unwrap_or(0) as u32;
        if fold(ones_sum(l4, ph)) != 0xffff {
            st |= RXDEXT_STATERR_TCPE;
        }
    }
    st
}
