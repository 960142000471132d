//! Hugepage-backed DMA memory, when the test runs as root: reserves the
//! pages it needs through sysfs, checks page size, sharing and physical
//! contiguity within a page, and gives the pages back.
use rpmd_pmd::testing::{missing_capability, missing_peer};
use rpmd_pmd::{hugepages, DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize};

const TWO_MB: u64 = 2 << 20;

/// Restores the reservation on drop, even when an assertion fails.
struct Reservation(u64);

impl Drop for Reservation {
    fn drop(&mut self) {
        let _ = hugepages::reserve(TWO_MB, self.0);
    }
}

#[test]
fn hugepage_regions_and_pools() {
    const TEST: &str = "pmd hugepage_regions_and_pools";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing_peer(TEST, "reserving hugepages needs root");
        return;
    }
    let Some(before) = hugepages::pool(TWO_MB).unwrap() else {
        missing_peer(TEST, "no 2 MiB hugepage support in this kernel");
        return;
    };
    let _restore = Reservation(before.total);
    let after = hugepages::reserve(TWO_MB, before.total + 4).unwrap();
    assert!(after.free >= before.free + 4, "{before:?} -> {after:?}");

    let r = DmaRegion::with_page_size("t-huge", 3 << 20, IovaMode::Pa, PageSize::Huge2M).unwrap();
    assert_eq!((r.page_size(), r.len()), (PageSize::Huge2M, 4 << 20));
    assert_eq!(
        hugepages::pool(TWO_MB).unwrap().unwrap().free,
        after.free - 2
    );
    // Physically contiguous within each 2 MiB page.
    let a = r.iova(0).unwrap().raw();
    assert_eq!(a % TWO_MB, 0);
    assert_eq!(r.iova((1 << 20) + 5).unwrap().raw(), a + (1 << 20) + 5);
    drop(r);
    assert_eq!(
        hugepages::pool(TWO_MB).unwrap().unwrap().free,
        after.free,
        "pages given back"
    );

    // A mempool on hugepages with IOVA = PA.
    let mut c = MempoolConfig::new("t-huge-pool", 1024);
    c.iova_mode = IovaMode::Pa;
    let p = Mempool::new(&c).unwrap();
    assert_eq!(p.region().page_size(), PageSize::Huge2M);
    let m = p.get().unwrap();
    assert_eq!(p.region().iova_of(m.data().as_ptr()), Some(m.data_iova()));
}

#[test]
fn gigabyte_pages_for_large_regions_when_reserved() {
    const TEST: &str = "pmd gigabyte_pages_for_large_regions_when_reserved";
    const GIG: u64 = 1 << 30;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing_peer(TEST, "reserving hugepages needs root");
        return;
    }
    let Some(before) = hugepages::pool(GIG).unwrap() else {
        missing_capability(TEST, "no 1 GiB hugepage support in this kernel");
        return;
    };
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = hugepages::reserve(1 << 30, self.0);
        }
    }
    let _restore = Restore(before.total);
    let Ok(after) = hugepages::reserve(GIG, before.total + 1) else {
        missing_capability(TEST, "could not reserve a 1 GiB page");
        return;
    };
    if after.free < 1 {
        missing_capability(TEST, "no 1 GiB page free (memory too fragmented)");
        return;
    }
    // `new` picks 1 GiB pages for a region of 1 GiB when one is free.
    let r = DmaRegion::new("t-gig", GIG as usize, IovaMode::Va).unwrap();
    assert_eq!(r.page_size(), PageSize::Huge1G);
    assert_eq!(r.as_ptr() as u64 % GIG, 0);
    assert_eq!(hugepages::pool(GIG).unwrap().unwrap().free, after.free - 1);
}
