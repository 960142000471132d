//! Link-status-change events by interrupt: a card's async EQ raises MSI-X
//! vector 0 when the firmware posts a port change (a cable pulled or
//! plugged), and one watcher thread per card sleeps on it, reads the EQ
//! ([`Hca::poll_events`], which raises the ports' [`LinkEvents`] for the
//! changes it reads, whoever calls it) and re-arms it. A card that fails
//! raises both ports' events. The watcher ends with the card.
use crate::{Error, Hca};
use rpmd_pmd::port::events::LinkEvents;
use std::sync::{Mutex, Weak};
use std::time::Duration;

/// How long the watcher sleeps before it looks again anyway (the card
/// gone, a failure with no event).
const TICK: Duration = Duration::from_millis(100);

/// Gives `port`'s link events to its card and starts the card's watcher
/// if none runs; false when the card has no MSI-X (the link is then
/// polled).
pub(crate) fn watch(
    card: &std::sync::Arc<Mutex<Hca>>,
    port: u8,
    events: &LinkEvents,
) -> Result<bool, Error> {
    let mut hca = card.lock().unwrap_or_else(|e| e.into_inner());
    let Some(vector) = hca.msix.first() else {
        return Ok(false);
    };
    let fd = vector.try_clone().map_err(|e| Error::Memory {
        what: "a handle on the async EQ's interrupt".into(),
        source: e,
    })?;
    if let Some(slot) = (port as usize)
        .checked_sub(1)
        .and_then(|i| hca.link_events.get_mut(i))
    {
        *slot = Some(events.clone());
    }
    if hca.link_watch {
        return Ok(true);
    }
    hca.link_watch = true;
    // Armed now; events already waiting raise the vector at once.
    hca.ring_async_eq()?;
    let weak = std::sync::Arc::downgrade(card);
    std::thread::Builder::new()
        .name("mlx4-link".into())
        .spawn(move || run(weak, fd))
        .map_err(|e| Error::Firmware(format!("no link watcher thread: {e}")))?;
    Ok(true)
}

fn run(card: Weak<Mutex<Hca>>, fd: rpmd_pmd::function::EventFd) {
    loop {
        // A wait that fails (it should not) still paces the loop.
        if fd.wait(TICK).is_err() {
            std::thread::sleep(TICK);
        }
        let Some(card) = card.upgrade() else { return };
        let mut hca = card.lock().unwrap_or_else(|e| e.into_inner());
        if hca.is_closed() {
            return;
        }
        if hca.failure().is_some() {
            continue;
        }
        if let Err(e) = hca.poll_events() {
            eprintln!("rpmd: warning: mlx4 link watcher: {e}");
        }
    }
}
