//! Constants transcribed from the virtio 1.2 specification and the
//! vhost-user protocol, each with its section. Feature bit numbers come
//! from `virtio-bindings` where it has them.
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1 as F_VERSION_1;
use virtio_bindings::virtio_net::{
    VIRTIO_NET_F_MAC as F_MAC, VIRTIO_NET_F_MQ as F_MQ, VIRTIO_NET_F_MRG_RXBUF as F_MRG_RXBUF,
};

/// §6.1: the device complies with virtio 1.x.
pub const VIRTIO_F_VERSION_1: u64 = 1 << F_VERSION_1;
/// §5.1.3: the device has a MAC address.
pub const VIRTIO_NET_F_MAC: u64 = 1 << F_MAC;
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

/// §5.1.6: the virtio-net header before every frame when VERSION_1 is
/// negotiated (flags, gso_type, hdr_len, gso_size, csum_start,
/// csum_offset, num_buffers): 12 bytes.
pub const NET_HDR_LEN: usize = 12;
