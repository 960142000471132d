//! The asynchronous event queue (digest §2.2 step 6, §2.7, §3.4;
//! `core/eq.c`): where the firmware reports port changes, CQ errors and QP
//! events. rpmd polls it (receive queues have interrupts of their own,
//! `irq`): [`Hca::poll_events`] reads the
//! EQEs the device owns no more, by owner bit, and hands the consumer
//! index back through the EQ doorbell in the UAR.
use crate::hcr::Cmd;
use crate::prm::layout::{EqCtx, Eqe};
use crate::prm::mem::{DevBuf, Wire};
use crate::prm::{eq as p, op, uar, wire32};
use crate::res::MttRange;
use crate::{Error, Hca};
use rpmd_pmd::endian::Be32;
use std::sync::atomic::{fence, Ordering};

/// EQEs in the async EQ (Linux: 0x100 + 0x80 spare, rounded up).
pub const ASYNC_EQ_ENTRIES: u32 = 512;

/// What the firmware reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A port's link went up or down.
    PortChange {
        /// 1-based.
        port: u8,
        /// Up now.
        up: bool,
    },
    /// A CQ overran or could not be written.
    CqError {
        /// The CQ.
        cqn: u32,
        /// 1 = overrun.
        syndrome: u8,
    },
    /// A QP event (type 1–3, 5, 7, 0x10, 0x11, 0x13).
    Qp {
        /// The event type.
        kind: u8,
        /// The QP.
        qpn: u32,
    },
    /// Anything else, by type and subtype.
    Other {
        /// Type.
        kind: u8,
        /// Subtype.
        subtype: u8,
    },
}

/// The async EQ as the driver keeps it.
pub(crate) struct Eq {
    pub(crate) eqn: u32,
    buf: DevBuf,
    mtt: MttRange,
    ci: u32,
}

impl Eq {
    fn decode(e: &Eqe) -> Event {
        let be32 = |at: usize| u32::from_be_bytes(e.data[at..at + 4].try_into().unwrap_or([0; 4]));
        match e.kind {
            // Port at bits 31:28 of the be32 at EQE 0x0c (data + 8).
            p::EV_PORT_CHANGE => Event::PortChange {
                port: (be32(8) >> 28) as u8,
                up: e.subtype == p::PORT_ACTIVE,
            },
            p::EV_CQ_ERROR => Event::CqError {
                cqn: be32(0) & 0xff_ffff,
                syndrome: e.data[0x0b],
            },
            0x01..=0x03 | 0x05 | 0x07 | 0x10 | 0x11 | 0x13 => Event::Qp {
                kind: e.kind,
                qpn: be32(0) & 0xff_ffff,
            },
            kind => Event::Other {
                kind,
                subtype: e.subtype,
            },
        }
    }
}

impl Hca {
    /// SW2HW_EQ of the async EQ (a zeroed buffer: the firmware marks
    /// every EQE its own), then MAP_EQ with the async event mask.
    pub(crate) fn create_async_eq(&mut self, eqn: u32) -> Result<(), Error> {
        let bytes = ASYNC_EQ_ENTRIES as usize * p::EQE;
        let buf = DevBuf::new(&**self.function(), "mlx4 async EQ", bytes)?;
        let mtt = self.map_mtt(&buf)?;
        let mut c = EqCtx::zeroed();
        c.flags = Be32::new(p::STATE_ARMED);
        c.log_eq_size = ASYNC_EQ_ENTRIES.trailing_zeros() as u8;
        c.log_page_size = 0;
        (c.mtt_h, c.mtt_l) = mtt.offset();
        self.mailbox.clear();
        self.mailbox.put(0, &c);
        let sw2hw = self.hcr.exec(Cmd {
            opcode: op::SW2HW_EQ,
            in_mod: eqn,
            in_param: self.mailbox.iova(),
            ..Cmd::default()
        });
        if let Err(e) = sw2hw {
            self.unmap_mtt(mtt);
            return Err(e);
        }
        self.eq = Some(Eq {
            eqn,
            buf,
            mtt,
            ci: 0,
        });
        self.hcr
            .exec(Cmd {
                opcode: op::MAP_EQ,
                in_param: p::ASYNC_MASK,
                in_mod: eqn,
                ..Cmd::default()
            })
            .map(drop)
    }

    /// MAP_EQ (unmap), HW2SW_EQ; the buffer is freed only if the device
    /// gave it back.
    pub(crate) fn destroy_async_eq(&mut self) {
        let Some(eq) = self.eq.take() else { return };
        let unmap = self.hcr.exec(Cmd {
            opcode: op::MAP_EQ,
            in_param: p::ASYNC_MASK,
            in_mod: p::UNMAP | eq.eqn,
            ..Cmd::default()
        });
        if let Err(e) = unmap {
            eprintln!("rpmd: warning: mlx4: {e}");
        }
        match self.hcr.exec(Cmd {
            opcode: op::HW2SW_EQ,
            op_mod: 1,
            in_mod: eq.eqn,
            ..Cmd::default()
        }) {
            Ok(_) => self.unmap_mtt(eq.mtt),
            Err(e) => {
                eprintln!("rpmd: error: mlx4: HW2SW_EQ failed; keeping the EQ's memory: {e}");
                std::mem::forget(eq.buf);
            }
        }
    }

    /// Every event the device posted since the last call, oldest first;
    /// port changes also update [`Hca::link_up`].
    pub fn poll_events(&mut self) -> Result<Vec<Event>, Error> {
        if let Some(code) = self.failure() {
            return Err(Error::Catastrophic { code });
        }
        let Some(eq) = self.eq.as_mut() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        loop {
            let at = (eq.ci % ASYNC_EQ_ENTRIES) as usize * p::EQE;
            // Valid when the owner bit equals the pass's parity.
            let owner = eq.buf.load8(at + 0x1f) & 0x80 != 0;
            if owner != (eq.ci & ASYNC_EQ_ENTRIES != 0) {
                break;
            }
            // The EQE's body is read after its owner bit (the device
            // writes the body first, then the owner byte).
            fence(Ordering::Acquire);
            let Some(e) = eq.buf.get::<Eqe>(at) else {
                break;
            };
            out.push(Eq::decode(&e));
            eq.ci = eq.ci.wrapping_add(1);
        }
        if !out.is_empty() {
            self.ring_async_eq()?;
        }
        for ev in &out {
            if let Event::PortChange { port, up } = *ev {
                let i = (port as usize).checked_sub(1);
                if let Some(l) = i.and_then(|i| self.link.get_mut(i)) {
                    *l = up;
                }
                if let Some(e) = i
                    .and_then(|i| self.link_events.get(i))
                    .and_then(Option::as_ref)
                {
                    e.raise();
                }
            }
        }
        Ok(out)
    }

    /// Hands the async EQ's consumer index back, arming it too while a
    /// link watcher sleeps on its vector.
    pub(crate) fn ring_async_eq(&mut self) -> Result<(), Error> {
        let Some(eq) = self.eq.as_ref() else {
            return Ok(());
        };
        let arm = if self.link_watch { uar::EQ_ARM } else { 0 };
        let at = crate::irq::eq_doorbell(eq.eqn);
        let v = wire32(eq.ci & 0xff_ffff | arm);
        self.uar()?.write32(at, v).map_err(|e| Error::Register {
            what: "EQ doorbell".into(),
            source: e,
        })
    }
}
