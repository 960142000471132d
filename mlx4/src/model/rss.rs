//! The model's RSS (digest §2.8: an RSS QP's context sits 0x24 bytes
//! into the primary path): a frame steered to an indirection QP goes to
//! the receive QP
//! `base + (hash & (2^log − 1))`, the hash a Toeplitz hash of its IPv4 or
//! IPv6 addresses and, where the context's flags ask, its TCP or UDP
//! ports (Microsoft's RSS specification, which mlx4's TOP hash
//! implements); frames with nothing to hash go to the default QP.
use super::objects::{bad, Refusal};
use crate::prm::layout::RssCtx;
use crate::prm::qp as p;

/// An indirection QP's RSS context, checked.
#[derive(Clone, Copy, Debug)]
pub(super) struct RssState {
    pub base: u32,
    pub log_n: u32,
    pub default_qpn: u32,
    pub flags: u8,
    pub key: [u8; p::RSS_KEY],
}

impl RssState {
    pub fn of(r: &RssCtx) -> Result<RssState, Refusal> {
        let b = r.base_qpn.get();
        let (log_n, base) = (b >> 24, b & 0xff_ffff);
        if r.hash_fn != p::RSS_HASH_TOP {
            return bad(format!(
                "RSS hash function {} (the model does Toeplitz, 1)",
                r.hash_fn
            ));
        }
        if log_n > 8 || base % (1 << log_n) != 0 {
            return bad(format!("RSS over 2^{log_n} QPs from {base:#x}"));
        }
        Ok(RssState {
            base,
            log_n,
            default_qpn: r.default_qpn.get() & 0xff_ffff,
            flags: r.flags,
            key: r.rss_key,
        })
    }

    /// The receive QP for `frame`, and the hash (0 when nothing hashed).
    pub fn pick(&self, frame: &[u8]) -> (u32, u32) {
        let mut input = [0u8; 36];
        let n = self.input(frame, &mut input);
        if n == 0 {
            return (self.default_qpn, 0);
        }
        let h = rpmd_pmd::net::rss::toeplitz(&self.key, &input[..n]);
        (self.base + (h & ((1 << self.log_n) - 1)), h)
    }

    /// The bytes hashed: source and destination addresses, then source
    /// and destination ports where the flags take the protocol's.
    fn input(&self, f: &[u8], out: &mut [u8; 36]) -> usize {
        let Some(et) = f.get(12..14) else { return 0 };
        let l3 = &f[14..];
        let (addrs, proto, l4, tcp, udp) = match u16::from_be_bytes([et[0], et[1]]) {
            0x0800 if self.flags & p::RSS_IPV4 != 0 && l3.len() >= 20 => {
                let ihl = (l3[0] & 0xf) as usize * 4;
                let frag = u16::from_be_bytes([l3[6], l3[7]]) & 0x3fff != 0;
                let l4 = if frag {
                    &[][..]
                } else {
                    l3.get(ihl..).unwrap_or(&[])
                };
                (&l3[12..20], l3[9], l4, p::RSS_TCP_IPV4, p::RSS_UDP_IPV4)
            }
            0x86dd if self.flags & p::RSS_IPV6 != 0 && l3.len() >= 40 => (
                &l3[8..40],
                l3[6],
                &l3[40..],
                p::RSS_TCP_IPV6,
                p::RSS_UDP_IPV6,
            ),
            _ => return 0,
        };
        out[..addrs.len()].copy_from_slice(addrs);
        let mut n = addrs.len();
        let ports = (proto == 6 && self.flags & tcp != 0) || (proto == 17 && self.flags & udp != 0);
        if ports && l4.len() >= 4 {
            out[n..n + 4].copy_from_slice(&l4[..4]);
            n += 4;
        }
        n
    }
}
