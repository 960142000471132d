//! rr's wire format: UDP/IPv4 over Ethernet.
//!
//! The UDP payload opens with a 16-byte rr header and is padded to the
//! request or response size (at least the header; a 1-byte request is a
//! 60-byte frame on the wire either way, the Ethernet minimum):
//!
//! ```text
//! 0  'R' 'R'     magic
//! 2  kind        0 = request, 1 = response
//! 3  0           reserved
//! 4  seq         u32 LE, per session, +1 per transaction
//! 8  stamp       u64 LE, the client's clock (TSC ticks) at sending;
//!                the server echoes it
//! ```
//!
//! The session is the client's UDP source port minus [`BASE_PORT`]. The
//! server answers to the frame's source addresses, so one server serves
//! any number of clients and sessions. Templates are built once with
//! etherparse; the hot path patches a few fields in place and never
//! parses with it.
use etherparse::PacketBuilder;

/// UDP port of the server.
pub const SERVER_PORT: u16 = 5001;
/// Client session s sends from port `BASE_PORT + s`.
pub const BASE_PORT: u16 = 20000;
/// Bytes of the rr header.
pub const HDR: usize = 16;
/// Offset of the UDP payload in the frame.
pub const PAYLOAD: usize = 14 + 20 + 8;
/// Request.
pub const REQUEST: u8 = 0;
/// Response.
pub const RESPONSE: u8 = 1;

/// Client MAC, server MAC, client IP, server IP.
pub const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x72, 0x01];
/// The server's MAC as clients address it.
pub const SERVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x72, 0x02];
/// Client IPv4 address.
pub const CLIENT_IP: [u8; 4] = [10, 114, 0, 1];
/// Server IPv4 address.
pub const SERVER_IP: [u8; 4] = [10, 114, 0, 2];

/// UDP payload bytes for an application size (at least the header).
pub fn payload_len(size: usize) -> usize {
    size.max(HDR)
}

/// Frame bytes on the wire for an application size (at least 60).
pub fn frame_len(size: usize) -> usize {
    (PAYLOAD + payload_len(size)).max(60)
}

/// A request template for session 0 of `size` payload bytes, built with
/// etherparse; patch the source port, seq and stamp per request.
pub fn request_template(size: usize) -> Vec<u8> {
    let payload = vec![0u8; payload_len(size)];
    let b = PacketBuilder::ethernet2(CLIENT_MAC, SERVER_MAC)
        .ipv4(CLIENT_IP, SERVER_IP, 64)
        .udp(BASE_PORT, SERVER_PORT);
    let mut f = Vec::with_capacity(frame_len(size));
    b.write(&mut f, &payload)
        .expect("writing into a Vec cannot fail");
    f[PAYLOAD] = b'R';
    f[PAYLOAD + 1] = b'R';
    f[PAYLOAD + 2] = REQUEST;
    // The UDP checksum covers the ports and payload we patch; IPv4 allows
    // none, so leave it zero rather than recompute it per frame.
    f[40] = 0;
    f[41] = 0;
    f.resize(frame_len(size), 0);
    f
}

/// Fills a request for session `s`.
#[inline]
pub fn patch_request(f: &mut [u8], session: u16, seq: u32, stamp: u64) {
    f[34..36].copy_from_slice(&(BASE_PORT + session).to_be_bytes());
    f[PAYLOAD + 4..PAYLOAD + 8].copy_from_slice(&seq.to_le_bytes());
    f[PAYLOAD + 8..PAYLOAD + 16].copy_from_slice(&stamp.to_le_bytes());
}

/// What a received rr frame says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// [`REQUEST`] or [`RESPONSE`].
    pub kind: u8,
    /// Client UDP port (requests: source; responses: destination).
    pub client_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Client clock at send (ns).
    pub stamp: u64,
}

/// Reads the rr fields of a frame; `None` for anything that is not an rr
/// frame (wrong ethertype, protocol, port or magic, or too short).
#[inline]
pub fn parse(f: &[u8]) -> Option<Parsed> {
    if f.len() < PAYLOAD + HDR
        || f[12..14] != [0x08, 0x00]
        || f[14] != 0x45
        || f[23] != 17
        || f[PAYLOAD..PAYLOAD + 2] != *b"RR"
    {
        return None;
    }
    let sport = u16::from_be_bytes([f[34], f[35]]);
    let dport = u16::from_be_bytes([f[36], f[37]]);
    let kind = f[PAYLOAD + 2];
    let client_port = match kind {
        REQUEST if dport == SERVER_PORT => sport,
        RESPONSE if sport == SERVER_PORT => dport,
        _ => return None,
    };
    Some(Parsed {
        kind,
        client_port,
        seq: u32::from_le_bytes(f[PAYLOAD + 4..PAYLOAD + 8].try_into().ok()?),
        stamp: u64::from_le_bytes(f[PAYLOAD + 8..PAYLOAD + 16].try_into().ok()?),
    })
}

/// Ones'-complement sum of `a` and `b` (RFC 1071).
#[inline]
fn ones_add(a: u16, b: u16) -> u16 {
    let (s, carry) = a.overflowing_add(b);
    s + u16::from(carry)
}

/// Turns a request (`f`, `len` bytes valid) into the response in place:
/// addresses swapped, kind set, lengths and IPv4 checksum for a payload of
/// `resp` bytes. Returns the response's frame length; the caller resizes
/// the buffer to it (the bytes beyond the request are left as they are).
#[inline]
pub fn make_response(f: &mut [u8], resp: usize) -> usize {
    let mut tmp = [0u8; 6];
    tmp.copy_from_slice(&f[0..6]);
    f.copy_within(6..12, 0);
    f[6..12].copy_from_slice(&tmp);
    let mut ip = [0u8; 4];
    ip.copy_from_slice(&f[26..30]);
    f.copy_within(30..34, 26);
    f[30..34].copy_from_slice(&ip);
    let mut port = [0u8; 2];
    port.copy_from_slice(&f[34..36]);
    f.copy_within(36..38, 34);
    f[36..38].copy_from_slice(&port);
    f[PAYLOAD + 2] = RESPONSE;
    let payload = payload_len(resp);
    // Swapping the addresses leaves the IPv4 checksum as it is; only the
    // total length changes it, updated incrementally (RFC 1624, eqn. 3:
    // HC' = ~(~HC + ~m + m')).
    let old_len = u16::from_be_bytes([f[16], f[17]]);
    let new_len = (20 + 8 + payload) as u16;
    if old_len != new_len {
        let hc = u16::from_be_bytes([f[24], f[25]]);
        let c = !ones_add(ones_add(!hc, !old_len), new_len);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[16..18].copy_from_slice(&new_len.to_be_bytes());
    }
    f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    frame_len(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    fn udp(f: &[u8]) -> (etherparse::Ipv4Header, u16, u16, usize) {
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let Some(NetSlice::Ipv4(ip)) = p.net else {
            panic!("not ipv4")
        };
        let Some(TransportSlice::Udp(u)) = p.transport else {
            panic!("not udp")
        };
        (
            ip.header().to_header(),
            u.source_port(),
            u.destination_port(),
            u.payload().len(),
        )
    }

    #[test]
    fn requests_and_responses_are_valid_udp_ipv4() {
        for (req, resp) in [(1, 1), (16, 100), (200, 1), (1400, 1400)] {
            let mut f = request_template(req);
            assert_eq!(f.len(), frame_len(req));
            patch_request(&mut f, 7, 42, 123_456);
            let (h, sp, dp, n) = udp(&f);
            assert_eq!((sp, dp, n), (BASE_PORT + 7, SERVER_PORT, payload_len(req)));
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            let p = parse(&f).unwrap();
            assert_eq!(
                (p.kind, p.client_port, p.seq, p.stamp),
                (REQUEST, BASE_PORT + 7, 42, 123_456)
            );
            let mut buf = f.clone();
            buf.resize(2048, 0);
            let len = make_response(&mut buf, resp);
            buf.truncate(len);
            let (h, sp, dp, n) = udp(&buf);
            assert_eq!((sp, dp, n), (SERVER_PORT, BASE_PORT + 7, payload_len(resp)));
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "{req}/{resp}");
            assert_eq!((h.source, h.destination), (SERVER_IP, CLIENT_IP));
            assert_eq!(&buf[0..6], &CLIENT_MAC);
            let p = parse(&buf).unwrap();
            assert_eq!(
                (p.kind, p.client_port, p.seq, p.stamp),
                (RESPONSE, BASE_PORT + 7, 42, 123_456)
            );
        }
    }

    #[test]
    fn other_frames_are_not_rr() {
        let f = request_template(1);
        assert!(parse(&f[..40]).is_none());
        for (at, v) in [
            (12, 0x86),
            (23, 6),
            (PAYLOAD, b'X'),
            (PAYLOAD + 2, 9),
            (37, 1),
        ] {
            let mut g = f.clone();
            g[at] = v;
            assert!(parse(&g).is_none(), "byte {at}");
        }
    }
}
