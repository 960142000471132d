//! Test support: the model misbehaving as a broken or hostile card
//! could, for the fuzz targets and hostile-device tests. Nothing here
//! runs unless a test calls it.
use super::objects::QBuf;
use super::{lock, Mlx4Model};
use crate::prm::{cq as c, eq as e};

impl Mlx4Model {
    /// Writes `bytes` over entry `slot` (mod the queue size) of CQ `cqn`
    /// by DMA, as a device could: any owner bit, any fields. False if the
    /// CQ does not exist or its buffer is unreachable.
    pub fn write_cq_entry(&self, cqn: u32, slot: u32, bytes: &[u8; 32]) -> bool {
        let s = lock(&self.state);
        let Some(cq) = s.obj.cqs.get(&cqn).copied() else {
            return false;
        };
        let off = (slot & ((1 << cq.log_n) - 1)) as u64 * c::CQE as u64;
        self.write_raw(&s, cq.buf, off, bytes)
    }

    /// A frame arriving on `port` (see `inject`) whose receive
    /// completion claims `byte_cnt` bytes, whatever it holds.
    pub fn inject_claiming(&self, port: u8, frame: &[u8], byte_cnt: u32) -> super::RxOutcome {
        lock(&self.state).claimed_len = Some(byte_cnt);
        let out = self.inject(port, frame);
        lock(&self.state).claimed_len = None;
        out
    }

    /// The same for entry `slot` of EQ `eqn`.
    pub fn write_eq_entry(&self, eqn: u32, slot: u32, bytes: &[u8; 32]) -> bool {
        let s = lock(&self.state);
        let Some(eq) = s.obj.eqs.get(&eqn).copied() else {
            return false;
        };
        let off = (slot & ((1 << eq.log_n) - 1)) as u64 * e::EQE as u64;
        self.write_raw(&s, eq.buf, off, bytes)
    }

    fn write_raw(&self, s: &super::State, b: QBuf, off: u64, bytes: &[u8]) -> bool {
        self.qbuf_addr(s, b, off, bytes.len() as u64)
            .is_some_and(|a| self.iommu.write(a, bytes))
    }

    /// The CQs and EQs that exist now.
    pub fn queues(&self) -> (Vec<u32>, Vec<u32>) {
        let s = lock(&self.state);
        (
            s.obj.cqs.keys().copied().collect(),
            s.obj.eqs.keys().copied().collect(),
        )
    }

    /// From now on, every output mailbox of `opcode` carries `bytes`
    /// (zero-padded, or cut, to the command's length) instead of what the
    /// model would answer: firmware reporting anything at all.
    pub fn override_output(&self, opcode: u16, bytes: &[u8]) {
        lock(&self.state).overrides.push((opcode, bytes.to_vec()));
    }
}
