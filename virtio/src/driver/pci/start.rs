//! Starting a virtio-net PCI port: feature negotiation (§3.1.1), the
//! virtqueues (RX and TX per pair, then the control queue), MSI-X for rx
//! interrupts, DRIVER_OK, and what goes through the control queue
//! afterwards (the number of queue pairs, the receive filter).
use super::{
    perr, PmdError, Transport, VirtioPciDevice, F_ACCESS_PLATFORM, F_STATUS, NO_VECTOR, S_ACK,
    S_DRIVER, S_DRIVER_OK, S_FEATURES_OK,
};
use crate::consts::{
    ctrl, VIRTIO_F_RING_PACKED, VIRTIO_F_VERSION_1, VIRTIO_NET_F_CTRL_RX, VIRTIO_NET_F_CTRL_VQ,
    VIRTIO_NET_F_MAC, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_NET_F_MTU,
    VIRTIO_RING_F_EVENT_IDX,
};
use crate::driver::ctrl::{mac_table, rx_mode, CtrlQueue};
use crate::driver::net::{
    build_handles, offload_features, packed_feature, start_config, Handles, QueueHome, Ring,
};
use crate::driver::packed::{PackedLayout, PackedQueue};
use crate::driver::split::{Layout, SplitQueue};
use crate::fd::CallFd;
use crate::psrc;
use rpmd_pmd::port::{PortConfig, Queues, RxFilter, StartContext};
use rpmd_pmd::{DmaRegion, IovaMode};
use std::sync::Arc;

impl VirtioPciDevice {
    /// Resets the device and negotiates features (§3.1.1); returns the
    /// status bits to keep.
    fn negotiate(&mut self, conf: &PortConfig, pairs: u16) -> Result<u8, PmdError> {
        let name = self.name.clone();
        let t = &self.t;
        t.reset(&name)?;
        t.set_status(S_ACK | S_DRIVER)?;
        let legacy = t.is_legacy();
        let mut want = VIRTIO_NET_F_MAC
            | F_STATUS
            | VIRTIO_RING_F_EVENT_IDX
            | VIRTIO_NET_F_CTRL_VQ
            | VIRTIO_NET_F_CTRL_RX
            | VIRTIO_NET_F_MTU
            | offload_features(conf.offloads);
        if legacy {
            // The legacy header is 12 bytes only with mergeable buffers;
            // the data path writes and reads 12.
            if self.offered & VIRTIO_NET_F_MRG_RXBUF == 0 {
                return Err(crate::verr(
                    &name,
                    "feature negotiation",
                    crate::Error::MissingFeature {
                        need: "the legacy interface".into(),
                        feature: "VIRTIO_NET_F_MRG_RXBUF",
                        side: "device",
                        offered: self.offered,
                        hint: " (a legacy device without it has 10-byte headers, which are not supported)",
                    },
                ));
            }
            if self.want_packed {
                return Err(perr(
                    &name,
                    "packed_vq=1: the legacy interface has split rings only",
                ));
            }
            want |= VIRTIO_NET_F_MRG_RXBUF;
        } else {
            want |= VIRTIO_F_VERSION_1 | F_ACCESS_PLATFORM;
            if self.want_mrg {
                want |= VIRTIO_NET_F_MRG_RXBUF;
            }
            if pairs > 1 {
                want |= VIRTIO_NET_F_MQ;
            }
            want |= packed_feature(
                self.want_packed,
                self.offered,
                &name,
                "; in QEMU add packed=on",
            )?;
        }
        self.features = self.offered & want & !self.drop_features;
        if self.features & VIRTIO_NET_F_CTRL_VQ == 0 {
            // §5.1.3.1: CTRL_RX and MQ require CTRL_VQ; a device offering
            // them without a control queue (QEMU's ctrl_vq=off) gets
            // neither.
            self.features &= !(VIRTIO_NET_F_CTRL_RX | VIRTIO_NET_F_MQ);
        }
        t.set_features(self.features)?;
        // §3.1.1: FEATURES_OK exists for modern devices only; a device
        // that does not keep it set refuses the features.
        if legacy {
            return Ok(S_ACK | S_DRIVER);
        }
        t.set_status(S_ACK | S_DRIVER | S_FEATURES_OK)?;
        if t.status()? & S_FEATURES_OK == 0 {
            return Err(crate::verr(
                &name,
                "feature negotiation",
                crate::Error::FeaturesRefused {
                    asked: self.features,
                    offered: self.offered,
                },
            ));
        }
        Ok(S_ACK | S_DRIVER | S_FEATURES_OK)
    }

    pub(super) fn setup(&mut self, ctx: &StartContext<'_>) -> Result<Queues, PmdError> {
        let name = self.name.clone();
        let (conf, pool) = start_config(ctx)?;
        self.ctrl = None;
        let pairs = conf.rx_queues.max(conf.tx_queues);
        let base = self.negotiate(&conf, pairs)?;
        let plan = self.queue_plan(pairs)?;
        let packed = self.features & VIRTIO_F_RING_PACKED != 0;
        let lens: Vec<usize> = plan
            .iter()
            .map(|&(_, s)| {
                if packed {
                    PackedLayout::new(s).map(|l| l.len)
                } else {
                    Layout::new(s).map(|l| l.len)
                }
            })
            .collect::<Result<_, _>>()
            .map_err(|e| psrc(&name, "ring layout", e))?;
        let rings = self.ring_memory(&pool, lens.iter().sum())?;
        let mut offset = 0;
        if packed {
            let mut qs = Vec::new();
            for (&(i, size), len) in plan.iter().zip(&lens) {
                let l =
                    PackedLayout::new(size).map_err(|e| psrc(&name, "packed ring layout", e))?;
                qs.push(
                    PackedQueue::new(&rings, offset, l)
                        .map_err(|e| psrc(&name, format!("packed ring {i}"), e))?,
                );
                offset += len;
            }
            self.finish(qs, &plan, rings, pool, base, ctx)
        } else {
            let event_idx = self.features & VIRTIO_RING_F_EVENT_IDX != 0;
            let mut qs = Vec::new();
            for (&(i, size), len) in plan.iter().zip(&lens) {
                let l = Layout::new(size).map_err(|e| psrc(&name, "split ring layout", e))?;
                let mut q = SplitQueue::new(&rings, offset, l)
                    .map_err(|e| psrc(&name, format!("split ring {i}"), e))?;
                q.set_event_idx(event_idx);
                qs.push(q);
                offset += len;
            }
            self.finish(qs, &plan, rings, pool, base, ctx)
        }
    }

    /// (device index, entries) of each queue a start of `pairs` pairs
    /// sets up: RX and TX per pair, then the control queue if negotiated
    /// (§5.1.2: after all max_virtqueue_pairs pairs with MQ, else after
    /// pair 0). The device fixes sizes on the legacy interface; on the
    /// modern one, queue_size= for data queues and at most 64 entries for
    /// the control queue. Several pairs need MQ and a control queue.
    fn queue_plan(&self, pairs: u16) -> Result<Vec<(u16, u16)>, PmdError> {
        let has_ctrl = self.features & VIRTIO_NET_F_CTRL_VQ != 0;
        if pairs > 1 && (self.features & VIRTIO_NET_F_MQ == 0 || !has_ctrl) {
            return Err(crate::verr(
                &self.name,
                "feature negotiation",
                crate::Error::MissingFeature {
                    need: format!("{pairs} queue pairs"),
                    feature: "VIRTIO_NET_F_MQ and VIRTIO_NET_F_CTRL_VQ",
                    side: "device",
                    offered: self.features,
                    hint: "",
                },
            ));
        }
        let ctrl_index = if self.features & VIRTIO_NET_F_MQ != 0 {
            2 * self.dev_pairs
        } else {
            2
        };
        let mut plan: Vec<(u16, u16)> = (0..2 * pairs).map(|i| (i, self.layout.size)).collect();
        if has_ctrl {
            plan.push((ctrl_index, 64));
        }
        for (i, size) in plan.iter_mut() {
            *size = match &self.t {
                Transport::Legacy(lg) => lg.queue_size(*i)?,
                Transport::Modern(m) if *i == ctrl_index => m.max_queue_size(*i)?.clamp(1, 64),
                Transport::Modern(_) => *size,
            };
        }
        Ok(plan)
    }

    /// `total` bytes for the rings, where the device reaches them: in
    /// physically contiguous (hugepage) memory at physical addresses for
    /// the legacy interface, mapped for this function at IOVA = VA for
    /// the modern one; the pool, of the matching kind, registered in the
    /// domain so the device reaches its buffers too.
    fn ring_memory(
        &mut self,
        pool: &rpmd_pmd::Mempool,
        total: usize,
    ) -> Result<Arc<DmaRegion>, PmdError> {
        let legacy = self.t.is_legacy();
        let want = if legacy { IovaMode::Pa } else { IovaMode::Va };
        if pool.region().iova_mode() != want {
            return Err(crate::verr(
                &self.name,
                "rx pool",
                crate::Error::IovaMode { legacy },
            ));
        }
        self.func.domain().register_pool(pool)?;
        self.ring_map = None;
        if legacy {
            return Ok(Arc::new(DmaRegion::with_page_size(
                "virtio-pci rings",
                total,
                IovaMode::Pa,
                rpmd_pmd::PageSize::Huge2M,
            )?));
        }
        let rings = Arc::new(DmaRegion::new("virtio-pci rings", total, IovaMode::Va)?);
        let m = self.func.map_dma(&rings)?;
        self.ring_map = Some((rings.clone(), m));
        Ok(rings)
    }

    /// Gives the device `queues` (RX and TX per pair, then the control
    /// queue if negotiated, at the device indices of `plan`), routes each
    /// RX queue's completions to an MSI-X vector where the function has
    /// enough, sets DRIVER_OK, fills the RX rings in use, sets the number
    /// of pairs and programs the receive filter.
    fn finish<Q: Ring>(
        &mut self,
        queues: Vec<Q>,
        plan: &[(u16, u16)],
        rings: Arc<DmaRegion>,
        pool: rpmd_pmd::Mempool,
        base: u8,
        ctx: &StartContext<'_>,
    ) -> Result<Queues, PmdError> {
        let conf = ctx.conf;
        let name = self.name.clone();
        let pairs = conf.rx_queues.max(conf.tx_queues) as usize;
        let mut calls = self.route_interrupts(pairs)?;
        let mut kicks = Vec::new();
        for (k, (q, &(index, _))) in queues.iter().zip(plan).enumerate() {
            let vector = match calls.get(k / 2) {
                Some(Some(_)) if k % 2 == 0 && k < 2 * pairs => (k / 2) as u16,
                _ => NO_VECTOR,
            };
            kicks.push(
                self.t
                    .setup_queue(index, q.addresses(), q.size(), vector, &name)?,
            );
        }
        self.t.set_status(base | S_DRIVER_OK)?;
        let mut queues: Vec<_> = queues.into_iter().zip(kicks).collect();
        if queues.len() > 2 * pairs {
            if let Some((mut q, kick)) = queues.pop() {
                q.set_interrupts(false);
                self.ctrl = Some(Box::new(CtrlQueue {
                    q,
                    kick,
                    pool: pool.clone(),
                    stuck: false,
                }));
            }
        }
        // §5.1.6.5.5: the device uses one pair until told more.
        if self.features & VIRTIO_NET_F_MQ != 0 {
            if let Some(c) = self.ctrl.as_deref_mut() {
                c.command(
                    &name,
                    ctrl::CLASS_MQ,
                    ctrl::MQ_VQ_PAIRS_SET,
                    &(pairs as u16).to_le_bytes(),
                )?;
            }
        }
        self.apply_filters()?;
        let homes: Vec<Arc<QueueHome>> = (0..queues.len()).map(|_| Arc::default()).collect();
        self.homes = homes.clone();
        // Legacy devices take physical addresses, modern ones IOVA = VA
        // through the IOMMU: TX hands over frames of registered pools of
        // that kind.
        let mode = if self.t.is_legacy() {
            IovaMode::Pa
        } else {
            IovaMode::Va
        };
        let domain = self.func.domain().clone();
        let reach = || domain.reach(Some(mode));
        let h = Handles {
            pool: &pool,
            rings: &rings,
            rx_live: ctx.rx_live,
            tx_live: ctx.tx_live,
            stats: ctx.stats,
            reach: &reach,
            features: self.features,
            rx_queues: conf.rx_queues as usize,
            tx_queues: conf.tx_queues as usize,
            stamp: ctx.stamp,
            fault_desc_every: 0,
        };
        build_handles(
            &h,
            queues,
            |p| calls.get_mut(p).and_then(Option::take),
            |k| homes[k].clone(),
        )
    }

    /// MSI-X (modern transport, where the function has a vector per
    /// pair): vector q for RX queue q, and vector `pairs` for
    /// configuration changes where the function has one more and the link
    /// can change (the link watch's; without it the watch reads the
    /// status on its own pace); none for TX or the control queue. The
    /// RX queues' call fds, by pair.
    fn route_interrupts(&mut self, pairs: usize) -> Result<Vec<Option<CallFd>>, PmdError> {
        let mut calls: Vec<Option<CallFd>> = (0..pairs).map(|_| None).collect();
        self.config_irq = None;
        if let Transport::Modern(m) = &self.t {
            m.set_config_vector(NO_VECTOR)?;
            if self.msix as usize >= pairs {
                let config = self.features & super::F_STATUS != 0 && self.msix as usize > pairs;
                let mut fds = self.func.enable_msix((pairs + config as usize) as u32)?;
                if config && fds.len() > pairs {
                    let fd = fds.pop();
                    // §4.1.5.1.2: a device that cannot take the vector reads
                    // back NO_VECTOR.
                    m.set_config_vector(pairs as u16)?;
                    if m.config_vector()? == pairs as u16 {
                        self.config_irq = fd;
                    }
                }
                for (c, fd) in calls.iter_mut().zip(fds) {
                    *c = Some(CallFd::Msix(fd));
                }
            }
        }
        Ok(calls)
    }

    /// Programs the receive modes and MAC filter through the control
    /// queue (when the device has one with CTRL_RX).
    fn apply_filters(&mut self) -> Result<(), PmdError> {
        if self.features & VIRTIO_NET_F_CTRL_RX == 0 {
            return Ok(());
        }
        let Some(c) = self.ctrl.as_deref_mut() else {
            return Ok(());
        };
        let f = &self.filter;
        rx_mode(c, &self.name, f.promiscuous, f.allmulticast)?;
        mac_table(c, &self.name, &f.unicast, &f.multicast)
    }

    /// Whether the device has a receive filter we can program: a control
    /// queue with CTRL_RX (negotiated once started; offered before).
    pub(super) fn has_rx_filter(&self) -> bool {
        let f = if self.running {
            self.features
        } else {
            self.offered & !self.drop_features
        };
        let need = VIRTIO_NET_F_CTRL_VQ | VIRTIO_NET_F_CTRL_RX;
        f & need == need
    }

    /// Records a receive-filter change and, while running, programs it
    /// (the record stays as it was when that fails). A device without a
    /// receive filter delivers every frame: asking it to filter is an
    /// error, never a silent Ok.
    pub(super) fn set_modes(&mut self, filter: RxFilter) -> Result<(), PmdError> {
        let filters = !filter.promiscuous
            || !filter.allmulticast
            || !filter.unicast.is_empty()
            || !filter.multicast.is_empty();
        if !self.has_rx_filter() && filters {
            return Err(crate::verr(
                &self.name,
                "receive filter",
                crate::Error::NoReceiveFilter("the device has no control queue with CTRL_RX (VIRTIO_NET_F_CTRL_VQ and VIRTIO_NET_F_CTRL_RX), so it delivers every frame: promiscuous and all-multicast stay on, and there is no MAC filter"),
            ));
        }
        let old = std::mem::replace(&mut self.filter, filter);
        if !self.running {
            return Ok(());
        }
        let r = self.apply_filters();
        if r.is_err() {
            self.filter = old;
        }
        r
    }
}
