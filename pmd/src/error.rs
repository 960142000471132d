//! The pmd crate's error type.
use std::io;
use std::path::PathBuf;

/// Errors of the core runtime: memory, pools, ports, PCI and VFIO.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// What we were doing.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A sysfs or procfs file could not be read or written.
    #[error("{}: {source}{}", path.display(), hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
        /// How to fix it, when known.
        hint: Option<&'static str>,
    },
    /// Physical addresses were asked for but /proc/self/pagemap hides them.
    #[error("physical addresses of DMA memory are unavailable (pagemap shows no frame numbers): run as root (CAP_SYS_ADMIN), or use IOVA-as-VA with VFIO")]
    NoPhysAddr,
    /// Physical addressing needs pages at least as large as one object.
    #[error("IOVA-as-PA needs hugepages: an object of {obj_size} bytes does not fit in a {page_size}-byte page; reserve hugepages (rpmd hugepages, or echo N > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)")]
    PaNeedsHugepages {
        /// Object size asked for.
        obj_size: usize,
        /// Page size of the region.
        page_size: usize,
    },
    /// A size or count is out of range.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// Which parameter.
        what: &'static str,
        /// What was wrong with it.
        detail: String,
    },
    /// The ring under a mempool could not be created.
    #[error("mempool {pool}: {source}")]
    Ring {
        /// Pool name.
        pool: String,
        /// The ring error.
        #[source]
        source: rpmd_ring::Error,
    },
    /// The pool has no free object left.
    #[error("mempool {pool} exhausted: all {size} mbufs in use (asked for {wanted})")]
    Exhausted {
        /// Pool name (shared with the pool: a failed get on the data path
        /// allocates nothing).
        pool: std::sync::Arc<str>,
        /// Objects in the pool.
        size: u32,
        /// Objects asked for.
        wanted: usize,
    },
    /// A device string could not be parsed or names no registered driver.
    #[error("device {input:?}: {reason}{}", if accepted.is_empty() { String::new() } else { format!("; accepted forms:\n{accepted}") })]
    DeviceString {
        /// The string given.
        input: String,
        /// What is wrong with it.
        reason: String,
        /// The forms the registry accepts, one per line (empty when the
        /// string was rejected before a registry saw it).
        accepted: String,
    },
    /// A port configuration value is out of range or unsupported.
    #[error("port {port}: invalid {what}: {detail}")]
    Config {
        /// The port's device string.
        port: String,
        /// Which field.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// An operation that the port's state or kind does not allow.
    #[error("port {port}: {detail}")]
    Port {
        /// The port's device string.
        port: String,
        /// What went wrong.
        detail: String,
    },
    /// A driver's operation failed because of another error, which is
    /// kept as the source (a vhost-user request, a socket, an eventfd, a
    /// ring layout the driver rejected).
    #[error("port {port}: {what}: {source}")]
    Driver {
        /// The port's device string.
        port: String,
        /// What the driver was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A PCI device is missing or not usable.
    #[error("PCI device {addr}: {detail}{}", hint.as_ref().map(|h| format!(" (fix: {h})")).unwrap_or_default())]
    Pci {
        /// The PCI address as given.
        addr: String,
        /// What is wrong.
        detail: String,
        /// How to fix it, when known.
        hint: Option<String>,
    },
    /// A VFIO check failed (what the kernel reported did not fit).
    #[error("VFIO {what}: {detail}{}", hint.as_ref().map(|h| format!(" (fix: {h})")).unwrap_or_default())]
    Vfio {
        /// The operation and object, e.g. "open /dev/vfio/3".
        what: String,
        /// The check that failed.
        detail: String,
        /// How to fix it, when known.
        hint: Option<String>,
    },
    /// A VFIO system call failed; the OS error is the source.
    #[error("VFIO {what}: {source}{}", hint.as_ref().map(|h| format!(" (fix: {h})")).unwrap_or_default())]
    VfioSys {
        /// The operation and object, e.g. "open /dev/vfio/3".
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
        /// How to fix it, when known.
        hint: Option<String>,
    },
    /// A device did not reach a state in time.
    #[error("{what}: timed out after {ms} ms")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The limit.
        ms: u64,
    },
}

impl Error {
    /// A system call's failure `source` while doing `what`.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Sys {
            what: what.into(),
            source,
        }
    }

    /// The failure of the system call that just returned an error (its
    /// `errno`), while doing `what`.
    pub(crate) fn sys(what: impl Into<String>) -> Self {
        Error::Sys {
            what: what.into(),
            source: io::Error::last_os_error(),
        }
    }
}
