//! The 82576's advanced descriptors (datasheet §7.1.5 receive, §7.2.2.3
//! transmit; Linux `e1000_82575.h`): 16 bytes each, little endian, in
//! the two formats each side uses (what the driver writes, what the
//! device writes back). Every layout is checked at compile time to be
//! the 16 bytes the device reads, and travels to and from the ring only
//! through [`crate::ring::DescRing`]'s volatile accesses.
#![allow(unsafe_code)]

use rpmd_pmd::endian::{Le16, Le32, Le64};

/// A descriptor layout: a `#[repr(C)]` struct of 16 bytes of
/// little-endian integers, no padding, any bit pattern valid.
///
/// # Safety
/// Implementors must be exactly 16 bytes, aligned to at most 16, with no
/// padding, and accept every bit pattern (every layout here is built of
/// `Le*` integers and asserts its size).
pub unsafe trait Layout: Copy {}

/// Receive, as the driver posts it: the buffer's address (advanced, one
/// buffer: no header buffer).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RxRead {
    /// Where the frame goes.
    pub pkt_addr: Le64,
    /// The header buffer (unused: 0).
    pub hdr_addr: Le64,
}

/// Receive, as the device writes it back.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RxWb {
    /// RSS type (bits 3:0) and packet type (bits 16:4 of the dword).
    pub pkt_info: Le16,
    /// Header length and split flag.
    pub hdr_info: Le16,
    /// The RSS hash (with RXCSUM.PCSD), else IP identification and
    /// checksum.
    pub rss: Le32,
    /// Status (bits 19:0) and errors (31:20).
    pub status_error: Le32,
    /// Bytes written to the buffer.
    pub length: Le16,
    /// The stripped VLAN tag (with status VP).
    pub vlan: Le16,
}

impl RxWb {
    /// Dword of [`status_error`](Self::status_error), for reading it
    /// alone before the rest (see [`crate::ring::DescRing::dword`]).
    pub const STATUS_DWORD: usize = 2;
}

/// Transmit data, as the driver writes it.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct TxData {
    /// The segment's address.
    pub addr: Le64,
    /// Length (bits 15:0), descriptor type (23:20), command (31:24).
    pub cmd_type_len: Le32,
    /// Status (3:0), context index (4), checksum options (13:8), payload
    /// length (31:14).
    pub olinfo_status: Le32,
}

/// Transmit context, as the driver writes it: what the offloads of the
/// data descriptors after it need.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct TxContext {
    /// IP header length (8:0), MAC header length (15:9), VLAN tag (31:16).
    pub vlan_macip_lens: Le32,
    /// Unused (IPsec).
    pub seqnum_seed: Le32,
    /// Descriptor type, command and L3/L4 types.
    pub type_tucmd_mlhl: Le32,
    /// Context index (4), L4 header length (15:8), MSS (31:16).
    pub mss_l4len_idx: Le32,
}

/// Transmit, as the device writes it back (only descriptors with RS).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct TxWb {
    /// Left as it was.
    pub rsvd: Le64,
    /// Unused.
    pub nxtseq_seed: Le32,
    /// Status: DD (bit 0).
    pub status: Le32,
}

impl TxWb {
    /// Dword of [`status`](Self::status).
    pub const STATUS_DWORD: usize = 3;
}

macro_rules! layouts {
    ($($t:ty),*) => {$(
        const _: () = assert!(size_of::<$t>() == 16 && align_of::<$t>() <= 16);
        // SAFETY: 16 bytes (asserted above) of `Le*` integers laid out
        // without gaps (each struct's fields fill it in order), so no
        // padding, and every bit pattern is valid.
        unsafe impl Layout for $t {}
    )*};
}
layouts!(RxRead, RxWb, TxData, TxContext, TxWb);

const _: () = {
    assert!(std::mem::offset_of!(RxWb, status_error) == 4 * RxWb::STATUS_DWORD);
    assert!(std::mem::offset_of!(RxWb, length) == 12);
    assert!(std::mem::offset_of!(TxData, cmd_type_len) == 8);
    assert!(std::mem::offset_of!(TxWb, status) == 4 * TxWb::STATUS_DWORD);
};
