//! The control virtqueue (virtio 1.2 §5.1.6.5): the driver sends a
//! command (class, command, data) and the device writes a one-byte ack
//! into the same chain. One command at a time, waited for with a timeout;
//! used at start and when the application changes a receive mode, never
//! on the data path.
//!
//! A command and its ack live in one mbuf of the port's pool, which the
//! device can reach already (mapped for it, or physically addressed):
//! `[class, command]`, then the data, then the ack byte, as two or three
//! descriptors of which only the last is device-writable.
use crate::consts::ctrl;
use crate::driver::net::{Kick, Ring};
use rpmd_pmd::port::MacAddr;
use rpmd_pmd::{Error as PmdError, Mempool};
use std::time::{Duration, Instant};

/// How long the device has to acknowledge a command.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The operations the port needs, whatever the ring type.
pub(crate) trait Control: Send {
    /// Sends one command and waits for its ack.
    fn command(&mut self, port: &str, class: u8, cmd: u8, data: &[u8]) -> Result<(), PmdError>;
}

pub(crate) struct CtrlQueue<Q: Ring> {
    pub(crate) q: Q,
    pub(crate) kick: Kick,
    pub(crate) pool: Mempool,
    /// A command timed out: its buffer may still be written by the
    /// device, so the queue is not used again until the next start.
    pub(crate) stuck: bool,
}

use crate::ControlFailure;

impl<Q: Ring> Control for CtrlQueue<Q> {
    fn command(&mut self, port: &str, class: u8, cmd: u8, data: &[u8]) -> Result<(), PmdError> {
        let what = format!("control command class {class} command {cmd}");
        let failed = |failure| {
            crate::verr(
                port,
                "control queue",
                crate::Error::Control {
                    class,
                    command: cmd,
                    failure,
                },
            )
        };
        if self.stuck {
            return Err(failed(ControlFailure::Stuck));
        }
        let mut m = self.pool.get()?;
        let n = 2 + data.len();
        let Some(buf) = m.append(n + 1) else {
            return Err(failed(ControlFailure::TooLong(data.len())));
        };
        buf[0] = class;
        buf[1] = cmd;
        buf[2..n].copy_from_slice(data);
        buf[n] = 0xff;
        let a = m.data_iova().raw();
        let chain = [(a, 2), (a + 2, data.len() as u32), (a + n as u64, 1)];
        let two = [chain[0], chain[2]];
        let segs: &[(u64, u32)] = if data.is_empty() { &two } else { &chain };
        if self.q.push_chain(m, segs, segs.len() - 1).is_err() {
            return Err(failed(ControlFailure::Full));
        }
        if self.q.publish() {
            self.kick.kick();
        }
        let t = Instant::now();
        loop {
            match self.q.pop_used() {
                Some(Ok((m, _))) => {
                    let ack = m.data()[n];
                    return if ack == ctrl::OK {
                        Ok(())
                    } else {
                        Err(failed(ControlFailure::Refused(ack)))
                    };
                }
                Some(Err(e)) => return Err(crate::psrc(port, what, e)),
                None if t.elapsed() > TIMEOUT => {
                    self.stuck = true;
                    return Err(PmdError::Timeout {
                        what: format!("port {port}: {what} acknowledged"),
                        ms: TIMEOUT.as_millis() as u64,
                    });
                }
                None => std::thread::sleep(Duration::from_micros(50)),
            }
        }
    }
}

/// §5.1.6.5.1: promiscuous or all-multicast mode on or off.
pub(crate) fn rx_mode(
    c: &mut dyn Control,
    port: &str,
    promisc: bool,
    allmulti: bool,
) -> Result<(), PmdError> {
    c.command(port, ctrl::CLASS_RX, ctrl::RX_PROMISC, &[promisc as u8])?;
    c.command(port, ctrl::CLASS_RX, ctrl::RX_ALLMULTI, &[allmulti as u8])
}

/// §5.1.6.5.2: the unicast and multicast filter tables (each a le32 count,
/// then the addresses).
pub(crate) fn mac_table(
    c: &mut dyn Control,
    port: &str,
    unicast: &[MacAddr],
    multicast: &[MacAddr],
) -> Result<(), PmdError> {
    let mut d = Vec::with_capacity(8 + 6 * (unicast.len() + multicast.len()));
    for list in [unicast, multicast] {
        d.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for m in list {
            d.extend_from_slice(&m.0);
        }
    }
    c.command(port, ctrl::CLASS_MAC, ctrl::MAC_TABLE_SET, &d)
}
