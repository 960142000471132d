//! Checksum offloads between the net header (virtio 1.2 §5.1.6) and the
//! mbuf's flags: the frames a device receives from its driver (the
//! backend's rx) and a driver from its device (the virtio ports' rx)
//! are read the same way.
//!
//! With the checksum feature negotiated (CSUM for a device, GUEST_CSUM
//! for a driver) a header may carry NEEDS_CSUM: the checksum from
//! `csum_start` to the end of the frame is left to be finished and
//! stored at `csum_start + csum_offset` (the field holds the
//! pseudo-header sum). When the application asked for the RX checksum
//! offload the frame stays partial and its mbuf says so as DPDK's do
//! (RX_L4_CKSUM_NONE) and asks for the completion on the way out
//! (TX_TCP_CKSUM / TX_UDP_CKSUM with the header lengths), so that a
//! forwarder hands it on to a port that finishes it (vhost_net between
//! two guests); otherwise the checksum is completed here in software, as
//! DPDK's `net_vhost` does, so the frame is right whichever port it
//! leaves by. DATA_VALID becomes RX_L4_CKSUM_GOOD under the offload. A
//! NEEDS_CSUM whose offsets fall outside the frame's headers is the
//! peer's error and drops the frame.
//!
//! To a guest (the backend's tx), a frame whose mbuf asks for a checksum
//! goes out as NEEDS_CSUM when the guest took GUEST_CSUM, or completed
//! in software on its copy in guest memory (never in the mbuf, which
//! other ports may hold too) when it did not. An IPv4 header checksum
//! (TX_IP_CKSUM), which virtio cannot carry, is always computed here. A
//! frame found good (RX_L4_CKSUM_GOOD) is marked DATA_VALID for a guest
//! with GUEST_CSUM.
use crate::consts::{CSUM_OFFSET_TCP, CSUM_OFFSET_UDP, NET_HDR_F_DATA_VALID, NET_HDR_F_NEEDS_CSUM};
use crate::vring::NetHdr;
use rpmd_pmd::endian::Le16;
use rpmd_pmd::mbuf;
use rpmd_pmd::net::{complete_checksum, ipv4_header_checksum, ones_sum_segments};
use rpmd_pmd::Mbuf;

/// Bytes of the net header the offloads read (flags to csum_offset):
/// what a legacy header without `num_buffers` holds.
pub(crate) const HDR_FIELDS: usize = 10;

/// Those bytes as the backend copies them out of a driver's buffer: read
/// as a [`NetHdr`] only when `flags` asks for something (the data path's
/// common case reads one byte of them).
pub(crate) type HdrFields = [u8; HDR_FIELDS];

/// What became of a frame's checksum request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// None to act on (or one the frame cannot carry, left undone).
    #[default]
    Plain,
    /// Left partial: flagged in the mbuf, or NEEDS_CSUM to the guest.
    Partial,
    /// Completed here in software.
    Completed,
}

/// mbuf flags that make a frame to the guest take [`tx_header`].
pub(crate) const TX_FLAGS: u64 = mbuf::TX_L4_MASK | mbuf::TX_IP_CKSUM | mbuf::RX_L4_CKSUM_MASK;

/// Applies the net header `h` of a received frame to its mbuf `m` (the
/// frame without the header; see the module docs); `keep_partial`: the
/// application asked for the RX checksum offload.
pub(crate) fn rx(m: &mut Mbuf, h: &NetHdr, keep_partial: bool) -> Result<Outcome, &'static str> {
    if h.flags & NET_HDR_F_NEEDS_CSUM == 0 {
        if keep_partial && h.flags & NET_HDR_F_DATA_VALID != 0 {
            m.set_ol_flags(m.ol_flags() | mbuf::RX_L4_CKSUM_GOOD);
        }
        return Ok(Outcome::Plain);
    }
    let start = h.csum_start.get() as usize;
    let off = h.csum_offset.get() as usize;
    let field = start + off;
    // The field must lie in the first segment (the headers always do: a
    // first segment holds a whole mbuf's data room).
    if field + 2 > m.data().len() {
        return Err("NEEDS_CSUM with csum_start + csum_offset outside the frame's headers");
    }
    let l4 = match off as u16 {
        CSUM_OFFSET_TCP => Some(mbuf::TX_TCP_CKSUM),
        CSUM_OFFSET_UDP => Some(mbuf::TX_UDP_CKSUM),
        _ => None,
    };
    let l2 = l2_len(m.data());
    if keep_partial && start >= l2 + 20 {
        if let Some(l4) = l4 {
            m.set_ol_flags(m.ol_flags() | mbuf::RX_L4_CKSUM_NONE | l4);
            m.set_tx_header_lens(l2 as u16, (start - l2) as u16);
            return Ok(Outcome::Partial);
        }
    }
    let sum = ones_sum_segments(m.segments(), start);
    let c = complete_checksum(sum, l4 == Some(mbuf::TX_UDP_CKSUM));
    m.data_mut()[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(Outcome::Completed)
}

/// Up to two 2-byte fields of a frame to the guest whose bytes differ
/// from the mbuf's: (offset in the frame, value).
#[derive(Clone, Copy, Default)]
pub(crate) struct Patches {
    at: [(usize, [u8; 2]); 2],
    n: usize,
    /// What became of the L4 checksum request.
    pub(crate) outcome: Outcome,
}

impl Patches {
    fn push(&mut self, at: usize, v: u16) {
        self.at[self.n] = (at, v.to_be_bytes());
        self.n += 1;
    }

    /// The fields to write over the copied frame.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(usize, [u8; 2])> {
        self.at[..self.n].iter()
    }
}

/// Fills the offload fields of the net header `h` for the frame `m` (see
/// the module docs); `guest_csum`: the guest took GUEST_CSUM. Returns
/// the fields computed here, for the copy in guest memory. A request the
/// frame cannot carry (headers past its first segment, SCTP) is left
/// undone, as a NIC would send it.
#[cold]
pub(crate) fn tx_header(m: &Mbuf, guest_csum: bool, h: &mut NetHdr) -> Patches {
    let mut p = Patches::default();
    let f = m.ol_flags();
    if f & (mbuf::TX_L4_MASK | mbuf::TX_IP_CKSUM) == 0 {
        if guest_csum && f & mbuf::RX_L4_CKSUM_MASK == mbuf::RX_L4_CKSUM_GOOD {
            h.flags = NET_HDR_F_DATA_VALID;
        }
        return p;
    }
    let (l2, l3) = m.tx_header_lens();
    let d = m.data();
    let start = l2 + l3;
    if l3 < 20 || start > d.len() {
        return p;
    }
    if f & mbuf::TX_IP_CKSUM != 0 {
        p.push(l2 + 10, ipv4_header_checksum(&d[l2..start]));
    }
    let (off, udp) = match f & mbuf::TX_L4_MASK {
        mbuf::TX_TCP_CKSUM => (CSUM_OFFSET_TCP, false),
        mbuf::TX_UDP_CKSUM => (CSUM_OFFSET_UDP, true),
        _ => return p,
    };
    let field = start + off as usize;
    if field + 2 > d.len() {
        return p;
    }
    if guest_csum {
        h.flags = NET_HDR_F_NEEDS_CSUM;
        h.csum_start = Le16::new(start as u16);
        h.csum_offset = Le16::new(off);
        p.outcome = Outcome::Partial;
    } else {
        p.push(
            field,
            complete_checksum(ones_sum_segments(m.segments(), start), udp),
        );
        p.outcome = Outcome::Completed;
    }
    p
}

/// The Ethernet header's length with up to two VLAN tags (802.1Q, QinQ).
fn l2_len(frame: &[u8]) -> usize {
    let mut l2 = 14;
    while l2 < 22 && frame.len() >= l2 + 4 {
        match u16::from_be_bytes([frame[l2 - 2], frame[l2 - 1]]) {
            0x8100 | 0x88a8 => l2 += 4,
            _ => break,
        }
    }
    l2
}

#[cfg(test)]
mod tests {
    use super::l2_len;

    #[test]
    fn the_l2_length_counts_vlan_tags() {
        let mut f = [0u8; 64];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert_eq!(l2_len(&f), 14);
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
        assert_eq!(l2_len(&f), 18);
        f[12..14].copy_from_slice(&0x88a8u16.to_be_bytes());
        f[16..18].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(l2_len(&f), 22);
    }
}
