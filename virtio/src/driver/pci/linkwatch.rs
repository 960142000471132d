//! Link-status-change events of a virtio-net PCI function (§5.1.4:
//! `status` bit 0, VIRTIO_NET_S_LINK_UP, under VIRTIO_NET_F_STATUS; the
//! device raises a configuration-change interrupt when it changes).
//!
//! While the port runs and the app asked for link events, one thread
//! waits on the configuration-change MSI-X vector (where the function has
//! one to spare beyond the receive queues'), and reads the status on each
//! message and at least every 100 ms; a change of the link bit raises the
//! port's [`LinkEvents`]. Without a vector the reads alone find the
//! change, within 100 ms.
use rpmd_pmd::function::{EventFd, Regs};
use rpmd_pmd::port::events::{watch_wait, LinkEvents, WatchThread};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where the link bit lives: the device configuration's window and the
/// status field's offset in it.
pub(super) struct StatusField {
    pub regs: Arc<Regs>,
    pub offset: u64,
}

impl StatusField {
    /// Whether the device says the link is up (a failed read: down).
    pub(super) fn link_up(&self) -> bool {
        status_link_up(&self.regs, self.offset)
    }
}

/// The link bit of the status field at `offset` of `regs` (a failed read:
/// down); what the port's `link` and the watch both read.
pub(super) fn status_link_up(regs: &Regs, offset: u64) -> bool {
    regs.read16(offset)
        .is_ok_and(|s| s & super::NET_S_LINK_UP != 0)
}

/// The watching thread; stops when dropped.
pub(super) struct LinkWatch {
    _thread: WatchThread,
    /// Configuration-change messages seen, link changes raised, and
    /// waits on the vector that failed (each returns at once).
    pub counts: Arc<[AtomicU64; 3]>,
}

impl LinkWatch {
    /// Watches `status`, woken by `config_irq` where there is one, and
    /// raises `events` on every change of the link bit.
    pub(super) fn spawn(
        status: StatusField,
        config_irq: Option<EventFd>,
        events: LinkEvents,
    ) -> LinkWatch {
        let counts: Arc<[AtomicU64; 3]> = Arc::default();
        let seen = counts.clone();
        // The state the port started with, read before any change can
        // come: each change after it is an event.
        let mut up = status.link_up();
        let pace = Duration::from_millis(100);
        let thread = WatchThread::spawn("virtio-link", move || {
            let woken = match &config_irq {
                Some(fd) => watch_wait(fd, pace, &seen[2]),
                None => {
                    std::thread::sleep(pace);
                    false
                }
            };
            if woken {
                seen[0].fetch_add(1, Ordering::Relaxed);
            }
            let now = status.link_up();
            if now != up {
                up = now;
                seen[1].fetch_add(1, Ordering::Relaxed);
                events.raise();
            }
        });
        LinkWatch {
            _thread: thread,
            counts,
        }
    }
}
