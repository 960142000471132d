//! One DMA domain for every port of a process (or of a [`Registry`]).
//!
//! DPDK keeps one VFIO container and one list of memory segments per
//! process, so that any device can reach any buffer. A [`DmaDomain`] is
//! that list: every region and mempool is registered once, and mapped
//! into every [`DmaTarget`] attached to the domain (a VFIO container, a
//! device model's IOMMU), whenever either comes first. A port can then
//! transmit an mbuf of any registered pool, whichever port received it.
//!
//! Ports that cannot map memory into their peer at any moment keep their
//! own set instead: a vhost-user frontend sends its memory table (every
//! registered region) when it connects and adds to it as its peer allows
//! ([`DomainWatcher`]); a [`Reach`] following that set ([`SpanSource`])
//! decides which mbufs it may hand over.
//!
//! Registered memory stays for the domain's life (the domain holds a
//! reference): an IOMMU mapping whose pages went back to the system could
//! be reused at the same IOVA by the next region. Translation stays
//! O(1): each mbuf carries the IOVA of its buffer; the domain only decides
//! whether a device can reach it.
//!
//! [`Registry`]: crate::port::Registry
use crate::{DmaRegion, Error, IovaMode, Mempool};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Something regions are mapped into: an IOMMU address space.
pub trait DmaTarget: Send + Sync {
    /// What it is, for error messages (`VFIO container`, `model 00:01.0`).
    fn name(&self) -> String;
    /// Maps `region` at IOVA = VA; the mapping lasts until the guard drops.
    fn map(&self, region: &DmaRegion) -> Result<DmaGuard, Error>;
}

/// A mapping in a [`DmaTarget`]; unmapped on drop.
pub struct DmaGuard(#[allow(dead_code)] Box<dyn Any + Send + Sync>);

impl DmaGuard {
    /// Wraps whatever undoes the mapping when dropped.
    pub fn new(undo: impl Any + Send + Sync) -> Self {
        DmaGuard(Box::new(undo))
    }
}

impl std::fmt::Debug for DmaGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DmaGuard")
    }
}

/// Told of every region registered: a port whose peer took a snapshot
/// of the domain (a vhost-user memory table) either extends the peer's
/// view (ADD_MEM_REG) or refuses the region with an error saying why.
/// Called without the domain's lock held (a watcher may wait for its
/// peer), one registration at a time.
pub trait DomainWatcher: Send + Sync {
    /// `region` is about to be registered; an error refuses it.
    fn region_added(&self, region: &DmaRegion) -> Result<(), Error>;

    /// `region`, which this watcher accepted, was refused by another (or
    /// could not be mapped): undo what `region_added` did, since the
    /// region may be freed.
    fn region_withdrawn(&self, _region: &DmaRegion) {}
}

/// A set of regions that can grow, which a [`Reach`] follows: the
/// domain, or the part of it a peer was given.
pub trait SpanSource: Send + Sync {
    /// Increases whenever the set grows.
    fn generation(&self) -> u64;
    /// The regions now.
    fn spans(&self) -> Vec<Span>;
}

/// Registered memory, kept alive by the domain.
#[derive(Clone)]
enum Held {
    Region(Arc<DmaRegion>),
    Pool(Mempool),
}

impl Held {
    fn region(&self) -> &DmaRegion {
        match self {
            Held::Region(r) => r,
            Held::Pool(p) => p.region(),
        }
    }
}

struct Entry {
    held: Held,
    /// One per target, in `targets` order.
    guards: Vec<DmaGuard>,
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    targets: Vec<Arc<dyn DmaTarget>>,
    /// Live while their ports run.
    watchers: Vec<std::sync::Weak<dyn DomainWatcher>>,
}

#[derive(Default)]
struct Shared {
    /// Held for a whole registration (watchers included), so they come
    /// one at a time; `inner` is taken only briefly inside it, so that a
    /// watcher's peer may read the domain meanwhile.
    registering: Mutex<()>,
    inner: Mutex<Inner>,
    /// Bumped whenever a region is registered, so a [`Reach`] knows to
    /// look again.
    generation: AtomicU64,
}

/// The set of DMA memory every device of a process can reach. Cheap to
/// clone (a shared handle).
#[derive(Clone, Default)]
pub struct DmaDomain {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DmaDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.shared.inner);
        f.debug_struct("DmaDomain")
            .field("regions", &inner.entries.len())
            .field(
                "targets",
                &inner.targets.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A region's bounds by virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// How its IOVAs are made.
    pub mode: IovaMode,
}

impl Span {
    fn of(r: &DmaRegion) -> Span {
        let start = r.as_ptr() as u64;
        Span {
            start,
            end: start + r.len() as u64,
            mode: r.iova_mode(),
        }
    }
}

impl DmaDomain {
    /// An empty domain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `a` and `b` are the same domain.
    pub fn same(a: &DmaDomain, b: &DmaDomain) -> bool {
        Arc::ptr_eq(&a.shared, &b.shared)
    }

    /// Registers `pool`'s memory (once: again is a no-op) and maps it into
    /// every attached target. The pool lives as long as the domain.
    pub fn register_pool(&self, pool: &Mempool) -> Result<(), Error> {
        self.register(Held::Pool(pool.clone()))
    }

    /// Registers a region (once) and maps it into every attached target.
    pub fn register_region(&self, region: &Arc<DmaRegion>) -> Result<(), Error> {
        self.register(Held::Region(region.clone()))
    }

    fn register(&self, held: Held) -> Result<(), Error> {
        let _one_at_a_time = lock(&self.shared.registering);
        let span = Span::of(held.region());
        // Mapped first (dropping the guards undoes it), then offered to
        // the watchers; nothing attaches or registers meanwhile (both take
        // `registering`).
        let (guards, watchers) = {
            let mut inner = lock(&self.shared.inner);
            if inner
                .entries
                .iter()
                .any(|e| Span::of(e.held.region()) == span)
            {
                return Ok(());
            }
            let mut guards = Vec::with_capacity(inner.targets.len());
            for t in &inner.targets {
                guards.push(t.map(held.region())?);
            }
            inner.watchers.retain(|w| w.strong_count() > 0);
            let w: Vec<Arc<dyn DomainWatcher>> =
                inner.watchers.iter().filter_map(|w| w.upgrade()).collect();
            (guards, w)
        };
        for (k, w) in watchers.iter().enumerate() {
            if let Err(e) = w.region_added(held.region()) {
                for earlier in &watchers[..k] {
                    earlier.region_withdrawn(held.region());
                }
                return Err(e);
            }
        }
        let mut inner = lock(&self.shared.inner);
        inner.entries.push(Entry { held, guards });
        self.shared.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Attaches `target` and maps every registered region into it; regions
    /// registered later are mapped as they come. On an error nothing of
    /// the target stays mapped.
    pub fn attach(&self, target: Arc<dyn DmaTarget>) -> Result<(), Error> {
        let _one_at_a_time = lock(&self.shared.registering);
        let mut inner = lock(&self.shared.inner);
        if inner.targets.iter().any(|t| Arc::ptr_eq(t, &target)) {
            return Ok(());
        }
        let mut guards = Vec::with_capacity(inner.entries.len());
        for e in &inner.entries {
            guards.push(target.map(e.held.region())?);
        }
        for (e, g) in inner.entries.iter_mut().zip(guards) {
            e.guards.push(g);
        }
        inner.targets.push(target);
        Ok(())
    }

    /// Tells `w` of every region registered from now on, until `w` is
    /// dropped (the domain keeps a weak reference).
    pub fn watch(&self, w: &Arc<dyn DomainWatcher>) {
        lock(&self.shared.inner).watchers.push(Arc::downgrade(w));
    }

    /// The registered regions' bounds, in registration order.
    pub fn spans(&self) -> Vec<Span> {
        let inner = lock(&self.shared.inner);
        inner
            .entries
            .iter()
            .map(|e| Span::of(e.held.region()))
            .collect()
    }

    /// Calls `f` on every registered region (for a vhost-user memory
    /// table, which needs each region's fd), in registration order.
    pub fn for_each_region(&self, mut f: impl FnMut(&DmaRegion)) {
        let held: Vec<Held> = lock(&self.shared.inner)
            .entries
            .iter()
            .map(|e| e.held.clone())
            .collect();
        for h in &held {
            f(h.region());
        }
    }

    /// Increases whenever a region is registered.
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// What a device attached to this domain can reach, following regions
    /// registered later (a device whose IOMMU gets every new mapping).
    pub fn reach(&self, mode: Option<IovaMode>) -> Reach {
        Reach::following(Arc::new(self.clone()), mode)
    }
}

impl SpanSource for DmaDomain {
    fn generation(&self) -> u64 {
        DmaDomain::generation(self)
    }
    fn spans(&self) -> Vec<Span> {
        DmaDomain::spans(self)
    }
}

/// A span no buffer lies inside (`start > end`).
const NO_SPAN: (u64, u64) = (u64::MAX, 0);

/// Which memory a device can reach, checked per buffer on the hot path:
/// a few compares against a short list (one region per pool), looked up
/// again only when a buffer is outside it and the domain has changed.
pub struct Reach {
    spans: Box<[(u64, u64)]>,
    /// `spans[0]`, or an empty span (nothing is inside it).
    first: (u64, u64),
    mode: Option<IovaMode>,
    /// The set followed, and its generation last read.
    source: Arc<dyn SpanSource>,
    seen: u64,
}

impl std::fmt::Debug for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reach")
            .field("spans", &self.spans.len())
            .field("seen", &self.seen)
            .finish()
    }
}

impl Reach {
    /// Follows `source`: buffers in regions it gains later are reached
    /// too (only regions of `mode`, if given).
    pub fn following(source: Arc<dyn SpanSource>, mode: Option<IovaMode>) -> Reach {
        let mut r = Reach {
            spans: Box::new([]),
            first: NO_SPAN,
            mode,
            source,
            seen: 0,
        };
        r.refresh();
        r
    }

    fn refresh(&mut self) {
        self.seen = self.source.generation();
        let mode = self.mode;
        self.spans = self
            .source
            .spans()
            .into_iter()
            .filter(|s| mode.is_none_or(|m| m == s.mode))
            .map(|s| (s.start, s.end))
            .collect();
        self.first = self.spans.first().copied().unwrap_or(NO_SPAN);
    }

    /// Looks again if the followed set changed (a region added or
    /// withdrawn): one atomic load, for the start of a burst, so that a
    /// withdrawn region stops being reached.
    #[inline(always)]
    pub fn sync(&mut self) {
        if self.source.generation() != self.seen {
            self.refresh();
        }
    }

    /// Whether the device can reach all of `bytes`.
    #[inline(always)]
    pub fn holds(&mut self, bytes: &[u8]) -> bool {
        self.holds_at(bytes.as_ptr(), bytes.len())
    }

    /// The span most buffers are in (the first pool's), for a caller
    /// that tests a burst against it from a local copy before asking
    /// [`holds_at`](Self::holds_at): `(start, end)`, empty if none.
    #[inline(always)]
    pub fn first_span(&self) -> (u64, u64) {
        self.first
    }

    /// Whether the device can reach the `len` bytes from `start` (which
    /// need not be one slice: a header in front of a frame, say).
    #[inline(always)]
    pub fn holds_at(&mut self, start: *const u8, len: usize) -> bool {
        let a = start as u64;
        let end = a.saturating_add(len as u64);
        // Most buffers are in the first span (one pool): tested first,
        // from a copy in the struct.
        let (s, e) = self.first;
        if (s <= a && end <= e) || self.spans.iter().any(|&(s, e)| s <= a && end <= e) {
            return true;
        }
        self.holds_slow(a, end)
    }

    #[cold]
    #[inline(never)]
    fn holds_slow(&mut self, a: u64, end: u64) -> bool {
        if self.source.generation() == self.seen {
            return false;
        }
        self.refresh();
        self.spans.iter().any(|&(s, e)| s <= a && end <= e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MempoolConfig;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Recorder {
        mapped: Arc<AtomicUsize>,
    }

    struct Unmap(Arc<AtomicUsize>);
    impl Drop for Unmap {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }

    impl DmaTarget for Recorder {
        fn name(&self) -> String {
            "recorder".into()
        }
        fn map(&self, _: &DmaRegion) -> Result<DmaGuard, Error> {
            self.mapped.fetch_add(1, Ordering::Relaxed);
            Ok(DmaGuard::new(Unmap(self.mapped.clone())))
        }
    }

    fn pool(name: &str) -> Mempool {
        let mut c = MempoolConfig::new(name, 64);
        c.cache_size = 0;
        Mempool::new(&c).unwrap()
    }

    #[test]
    fn regions_map_into_targets_in_either_order_once() {
        let d = DmaDomain::new();
        let a = pool("dom-a");
        d.register_pool(&a).unwrap();
        d.register_pool(&a).unwrap();
        let t = Arc::new(Recorder::default());
        let mapped = t.mapped.clone();
        d.attach(t.clone()).unwrap();
        d.attach(t).unwrap();
        assert_eq!(mapped.load(Ordering::Relaxed), 1);
        let b = pool("dom-b");
        d.register_pool(&b).unwrap();
        assert_eq!(mapped.load(Ordering::Relaxed), 2);
        assert_eq!(d.spans().len(), 2);
        drop(d);
        assert_eq!(
            mapped.load(Ordering::Relaxed),
            0,
            "unmapped with the domain"
        );
    }

    struct Refuse;
    impl DomainWatcher for Refuse {
        fn region_added(&self, _: &DmaRegion) -> Result<(), Error> {
            Err(Error::Port {
                port: "test".into(),
                detail: "a snapshot was taken".into(),
            })
        }
    }

    #[derive(Default)]
    struct Accept(std::sync::Mutex<Vec<&'static str>>);
    impl DomainWatcher for Accept {
        fn region_added(&self, _: &DmaRegion) -> Result<(), Error> {
            self.0.lock().unwrap().push("added");
            Ok(())
        }
        fn region_withdrawn(&self, _: &DmaRegion) {
            self.0.lock().unwrap().push("withdrawn");
        }
    }

    #[test]
    fn a_refusal_withdraws_the_region_from_watchers_that_took_it() {
        let d = DmaDomain::new();
        let t = Arc::new(Recorder::default());
        let mapped = t.mapped.clone();
        d.attach(t).unwrap();
        let ok = Arc::new(Accept::default());
        let ok_dyn: Arc<dyn DomainWatcher> = ok.clone();
        let no: Arc<dyn DomainWatcher> = Arc::new(Refuse);
        d.watch(&ok_dyn);
        d.watch(&no);
        assert!(d.register_pool(&pool("refused")).is_err());
        assert_eq!(*ok.0.lock().unwrap(), ["added", "withdrawn"]);
        assert_eq!(mapped.load(Ordering::Relaxed), 0, "unmapped again");
        assert!(d.spans().is_empty());
    }

    #[test]
    fn a_watcher_refuses_regions_while_it_lives() {
        let d = DmaDomain::new();
        let w: Arc<dyn DomainWatcher> = Arc::new(Refuse);
        d.watch(&w);
        let e = d.register_pool(&pool("watched")).unwrap_err().to_string();
        assert!(e.contains("snapshot"), "{e}");
        assert!(d.spans().is_empty(), "refused: not registered");
        drop(w);
        d.register_pool(&pool("unwatched")).unwrap();
    }

    #[test]
    fn reach_follows_the_domain() {
        let d = DmaDomain::new();
        let a = pool("reach-a");
        let b = pool("reach-b");
        d.register_pool(&a).unwrap();
        let mut live = d.reach(None);
        let (ma, mb) = (a.get().unwrap(), b.get().unwrap());
        assert!(live.holds(ma.data()));
        assert!(!live.holds(mb.data()));
        d.register_pool(&b).unwrap();
        assert!(live.holds(mb.data()), "registered later, followed");
        let mut pa_only = d.reach(Some(IovaMode::Pa));
        assert!(!pa_only.holds(ma.data()));
    }
}
