//! pmd::hdr's views over any bytes: each either refuses them with an
//! error or hands out fields and a payload that lie inside them, and
//! packet classification never fails.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_pmd::hdr::{Arp, Ethernet, Ipv4, Ipv6, PacketType, Tcp, Udp, Vlan};

fuzz_target!(|data: &[u8]| {
    let _ = PacketType::of(data).to_string();
    if let Ok(eth) = Ethernet::new_checked(data) {
        assert_eq!(eth.payload().len(), data.len() - 14);
        if let Some((tags, _, rest)) = eth.untagged() {
            assert!(tags <= 2 && rest.len() + 4 * tags == eth.payload().len());
        }
    }
    if let Ok(v) = Vlan::new_checked(data) {
        assert_eq!(v.payload().len(), data.len() - 4);
    }
    if let Ok(a) = Arp::new_checked(data) {
        let _ = (a.operation(), a.sender_mac(), a.target_ip());
    }
    if let Ok(ip) = Ipv4::new_checked(data) {
        assert!(ip.header_len() >= 20 && ip.header_len() <= ip.total_len());
        assert!(ip.total_len() <= data.len());
        assert_eq!(ip.payload().len(), ip.total_len() - ip.header_len());
        let _ = (ip.checksum_ok(), ip.pseudo_sum(), ip.is_fragment());
        if let Ok(u) = Udp::new_checked(ip.payload()) {
            assert!(u.len() >= 8 && u.len() <= ip.payload().len());
            assert_eq!(u.payload().len(), u.len() - 8);
            let _ = u.compute_checksum(ip.pseudo_sum());
        }
        if let Ok(t) = Tcp::new_checked(ip.payload()) {
            assert!(t.header_len() >= 20 && t.header_len() <= ip.payload().len());
            let _ = t.compute_checksum(ip.pseudo_sum());
        }
    }
    if let Ok(ip) = Ipv6::new_checked(data) {
        assert_eq!(ip.payload().len(), ip.payload_len());
        assert!(40 + ip.payload_len() <= data.len());
        let _ = ip.pseudo_sum();
    }
    // The writable views refill what they compute and stay in bounds.
    let mut own = data.to_vec();
    if let Ok(mut ip) = Ipv4::new_checked(&mut own[..]) {
        ip.fill_checksum();
        assert!(ip.checksum_ok());
        let pseudo = ip.pseudo_sum();
        if let Ok(mut u) = Udp::new_checked(ip.payload_mut()) {
            u.fill_checksum(pseudo);
        }
    }
});
