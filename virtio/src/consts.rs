//! Constants transcribed from the virtio 1.2 specification and the
//! vhost-user protocol, each with its section. Feature bit numbers come
//! from `virtio-bindings` where it has them.
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1 as F_VERSION_1;
use virtio_bindings::virtio_net::{
    VIRTIO_NET_F_CSUM as F_CSUM, VIRTIO_NET_F_CTRL_RX as F_CTRL_RX,
    VIRTIO_NET_F_CTRL_VQ as F_CTRL_VQ, VIRTIO_NET_F_GUEST_CSUM as F_GUEST_CSUM,
    VIRTIO_NET_F_MAC as F_MAC, VIRTIO_NET_F_MQ as F_MQ, VIRTIO_NET_F_MRG_RXBUF as F_MRG_RXBUF,
    VIRTIO_NET_F_MTU as F_MTU, VIRTIO_NET_HDR_F_DATA_VALID, VIRTIO_NET_HDR_F_NEEDS_CSUM,
};

/// §6.1: the device complies with virtio 1.x.
pub const VIRTIO_F_VERSION_1: u64 = 1 << F_VERSION_1;
/// §5.1.3: the device has a MAC address.
pub const VIRTIO_NET_F_MAC: u64 = 1 << F_MAC;
/// §5.1.3: the device takes frames with partial checksums (the driver
/// sets NEEDS_CSUM in the header, §5.1.6.2).
pub const VIRTIO_NET_F_CSUM: u64 = 1 << F_CSUM;
/// §5.1.3: the driver takes frames with partial checksums, and the
/// device may mark checksums it verified (DATA_VALID, §5.1.6.4).
pub const VIRTIO_NET_F_GUEST_CSUM: u64 = 1 << F_GUEST_CSUM;
/// §5.1.3/§5.1.4: the device reports its maximum MTU in the `mtu` field of
/// its configuration.
pub const VIRTIO_NET_F_MTU: u64 = 1 << F_MTU;
/// §5.1.3: a control virtqueue exists (§5.1.6.5), after the data queues.
pub const VIRTIO_NET_F_CTRL_VQ: u64 = 1 << F_CTRL_VQ;
/// §5.1.3: the control queue takes RX mode commands (promiscuous,
/// all-multicast) and MAC filter tables (§5.1.6.5.1–2).
pub const VIRTIO_NET_F_CTRL_RX: u64 = 1 << F_CTRL_RX;
/// §5.1.3: the driver can merge receive buffers.
pub const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << F_MRG_RXBUF;
/// §5.1.3: several receive/transmit queue pairs (§5.1.6.5.5). Over
/// vhost-user the pairs are enabled with `SET_VRING_ENABLE`, as DPDK's
/// virtio-user does, rather than through a control virtqueue.
pub const VIRTIO_NET_F_MQ: u64 = 1 << F_MQ;
/// §2.7.7/§2.7.10: notifications are suppressed by event indices
/// (`used_event` in the avail ring, `avail_event` in the used ring) rather
/// than by flags (bit 29).
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
/// §2.7.9/§6: the device uses buffers in the order they were made
/// available (bit 35).
pub const VIRTIO_F_IN_ORDER: u64 = 1 << 35;
/// §2.8: packed virtqueues (bit 34).
pub const VIRTIO_F_RING_PACKED: u64 = 1 << 34;
/// vhost-user: protocol features are negotiated (bit 30 of the features).
pub const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;

/// §2.7.5: the buffer continues in the `next` descriptor.
pub const VRING_DESC_F_NEXT: u16 = 1;
/// §2.7.5: the device writes the buffer (RX).
pub const VRING_DESC_F_WRITE: u16 = 2;
/// §2.7.6: the driver does not want interrupts.
pub const VRING_AVAIL_F_NO_INTERRUPT: u16 = 1;
/// §2.7.8: the device does not want notifications (kicks).
pub const VRING_USED_F_NO_NOTIFY: u16 = 1;

/// §5.1.6: header flag: the checksum from `csum_start` to the end is to
/// be completed and stored at `csum_start + csum_offset`.
pub const NET_HDR_F_NEEDS_CSUM: u8 = VIRTIO_NET_HDR_F_NEEDS_CSUM as u8;
/// §5.1.6.4: header flag (RX): the device validated the checksum.
pub const NET_HDR_F_DATA_VALID: u8 = VIRTIO_NET_HDR_F_DATA_VALID as u8;
/// §5.1.6.2: `csum_offset` of TCP's checksum field.
pub const CSUM_OFFSET_TCP: u16 = 16;
/// §5.1.6.2: `csum_offset` of UDP's checksum field.
pub const CSUM_OFFSET_UDP: u16 = 6;

/// §5.1.6.5: control command classes and commands, and the ack values.
pub mod ctrl {
    use virtio_bindings::virtio_net as n;
    /// Class: RX mode (§5.1.6.5.1).
    pub const CLASS_RX: u8 = n::VIRTIO_NET_CTRL_RX as u8;
    /// RX mode command: promiscuous on/off (one byte).
    pub const RX_PROMISC: u8 = n::VIRTIO_NET_CTRL_RX_PROMISC as u8;
    /// RX mode command: all-multicast on/off (one byte).
    pub const RX_ALLMULTI: u8 = n::VIRTIO_NET_CTRL_RX_ALLMULTI as u8;
    /// Class: MAC filtering (§5.1.6.5.2).
    pub const CLASS_MAC: u8 = n::VIRTIO_NET_CTRL_MAC as u8;
    /// MAC command: two tables (unicast, multicast), each a le32 count
    /// then 6-byte addresses.
    pub const MAC_TABLE_SET: u8 = n::VIRTIO_NET_CTRL_MAC_TABLE_SET as u8;
    /// Class: multiqueue (§5.1.6.5.5).
    pub const CLASS_MQ: u8 = n::VIRTIO_NET_CTRL_MQ as u8;
    /// MQ command: the number of queue pairs to use (le16).
    pub const MQ_VQ_PAIRS_SET: u8 = n::VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET as u8;
    /// Ack: the command succeeded.
    pub const OK: u8 = n::VIRTIO_NET_OK as u8;
}

/// §5.1.6: the virtio-net header before every frame when VERSION_1 is
/// negotiated (flags, gso_type, hdr_len, gso_size, csum_start,
/// csum_offset, num_buffers): 12 bytes.
pub const NET_HDR_LEN: usize = 12;
