//! rpmd's igb port against DPDK 22.11's igb PMD (`net_e1000_igb`) on the
//! other 82576 (`--dpdk-peer BDF,MAC`): guest-test.sh runs testpmd on it,
//! bound to vfio-pci, in `macswap` forwarding. Every frame rpmd sends
//! comes back from DPDK's driver with its addresses swapped and nothing
//! else changed, checked byte for byte, across sizes from 60 to 1514.
use crate::linux_peer::{eth, Peer};
use rpmd_pmd::Mbuf;

type R<T> = Result<T, String>;

/// 64 frames of 60 to 1514 bytes, each answered by testpmd's macswap.
pub fn macswap(p: &mut Peer) -> R<String> {
    let mut sizes = Vec::new();
    for k in 0..64u32 {
        let len = 60 + (k as usize * 97) % 1455;
        let mut f = eth(p.peer, p.mac, 0x88b5);
        f.extend_from_slice(&k.to_be_bytes());
        f.extend((f.len()..len).map(|i| (i as u32 ^ k.wrapping_mul(31)) as u8));
        let mut want = eth(p.mac, p.peer, 0x88b5);
        want.extend_from_slice(&f[14..]);
        let w = want.clone();
        let got = p.ask(&f, 0, 0, move |_: &Mbuf, b: &[u8]| b == &w[..])?;
        if got.is_none() {
            return Err(format!("frame {k} ({len} bytes) did not come back swapped"));
        }
        sizes.push(len);
    }
    Ok(format!(
        "64 frames of {}-{} bytes back from DPDK's igb, addresses swapped, byte for byte",
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0)
    ))
}
