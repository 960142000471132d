//! The XDP program that sends an interface's frames to our sockets:
//! libxdp's default AF_XDP program (`xsk_def_prog`, in Debian's libxdp1),
//! loaded and attached through libxdp, with its `xsks_map` updated
//! through libbpf. Both libraries are opened at run time.
//!
//! Why libxdp: it is what DPDK's `net_af_xdp` uses, its default program
//! ships (compiled and kept) with the library, and it handles both the
//! multi-program dispatcher (where a bpffs is mounted) and the plain
//! single program, so rpmd writes no BPF bytecode at all.
//!
//! Ownership: one attachment per interface per process, shared by its
//! sockets and detached with the last one. While attached, a state file
//! (`/run/rpmd/xdp/IFNAME.IFINDEX`) holds our pid: a later run that finds
//! `xsk_def_prog` attached with a dead pid there replaces it (a crashed
//! run's program is not stacked upon); any other program, or one no rpmd
//! process recorded, belongs to someone else and is left alone, with an
//! error that names it.
#![allow(unsafe_code)]

use libloading::Library;
use std::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// libxdp's name for its default AF_XDP program.
pub(crate) const DEFAULT_PROG: &str = "xsk_def_prog";
const PROG_FILE: &CStr = c"xsk_def_xdp_prog.o";
const MAP_NAME: &CStr = c"xsks_map";

/// How the program is attached (libxdp's `enum xdp_attach_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The driver's own XDP hook.
    Native = 1,
    /// The generic hook on the skb path (any interface).
    Skb = 2,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Skb => "skb",
        }
    }
}

type FindFile = unsafe extern "C" fn(*const c_char, *const c_char, *const c_void) -> *mut c_void;
type GetError = unsafe extern "C" fn(*const c_void) -> c_long;
type PtrToPtr = unsafe extern "C" fn(*const c_void) -> *mut c_void;
type Attach = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_uint) -> c_int;
type Close = unsafe extern "C" fn(*mut c_void);
type GetFromIfindex = unsafe extern "C" fn(c_int) -> *mut c_void;
type NextProg = unsafe extern "C" fn(*const c_void, *const c_void) -> *mut c_void;
type Name = unsafe extern "C" fn(*const c_void) -> *const c_char;
type Id = unsafe extern "C" fn(*const c_void) -> u32;
type ToInt = unsafe extern "C" fn(*const c_void) -> c_int;
type MpDetach = unsafe extern "C" fn(*mut c_void) -> c_int;
type FindMap = unsafe extern "C" fn(*const c_void, *const c_char) -> *mut c_void;
type SetMax = unsafe extern "C" fn(*mut c_void, u32) -> c_int;
type MapUpdate = unsafe extern "C" fn(c_int, *const c_void, *const c_void, u64) -> c_int;
type MapDelete = unsafe extern "C" fn(c_int, *const c_void) -> c_int;
type PrintFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;
type SetPrint = unsafe extern "C" fn(Option<PrintFn>) -> Option<PrintFn>;

/// The functions used, resolved once.
struct Lib {
    _xdp: Library,
    _bpf: Library,
    find_file: FindFile,
    get_error: GetError,
    bpf_obj: PtrToPtr,
    attach: Attach,
    close: Close,
    mp_get: GetFromIfindex,
    mp_main: PtrToPtr,
    mp_next: NextProg,
    mp_mode: ToInt,
    mp_detach: MpDetach,
    mp_close: Close,
    detach: Attach,
    prog_name: Name,
    prog_id: Id,
    find_map: FindMap,
    set_max: SetMax,
    map_fd: ToInt,
    map_update: MapUpdate,
    map_delete: MapDelete,
}

extern "C" fn quiet(_level: c_int, _fmt: *const c_char, _args: *mut c_void) -> c_int {
    0
}

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Lib, String> {
    let open = |name: &str| {
        // SAFETY: loading a system library runs its initialisers; libxdp
        // and libbpf have none with preconditions.
        unsafe { Library::new(name) }.map_err(|e| {
            format!("{name} could not be loaded ({e}); install Debian's libxdp1 and libbpf1 (apt-get install libxdp1 libbpf1)")
        })
    };
    let xdp = open("libxdp.so.1")?;
    let bpf = open("libbpf.so.1")?;
    macro_rules! sym {
        ($lib:expr, $name:literal) => {
            // SAFETY: the symbol's C prototype (libxdp.h, libbpf.h) is the
            // function type this field has.
            *unsafe { $lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{}: {e} (libxdp 1.2 or later needed)", $name))?
        };
    }
    let set_xdp_print: SetPrint = sym!(xdp, "libxdp_set_print");
    let set_bpf_print: SetPrint = sym!(bpf, "libbpf_set_print");
    // SAFETY: replacing the libraries' log callbacks with one that
    // ignores its arguments; its signature matches their print function
    // type (the va_list is passed as a pointer on the targets we build for).
    unsafe {
        set_xdp_print(Some(quiet));
        set_bpf_print(Some(quiet));
    }
    Ok(Lib {
        find_file: sym!(xdp, "xdp_program__find_file"),
        get_error: sym!(xdp, "libxdp_get_error"),
        bpf_obj: sym!(xdp, "xdp_program__bpf_obj"),
        attach: sym!(xdp, "xdp_program__attach"),
        close: sym!(xdp, "xdp_program__close"),
        mp_get: sym!(xdp, "xdp_multiprog__get_from_ifindex"),
        mp_main: sym!(xdp, "xdp_multiprog__main_prog"),
        mp_next: sym!(xdp, "xdp_multiprog__next_prog"),
        mp_mode: sym!(xdp, "xdp_multiprog__attach_mode"),
        mp_detach: sym!(xdp, "xdp_multiprog__detach"),
        mp_close: sym!(xdp, "xdp_multiprog__close"),
        detach: sym!(xdp, "xdp_program__detach"),
        prog_name: sym!(xdp, "xdp_program__name"),
        prog_id: sym!(xdp, "xdp_program__id"),
        find_map: sym!(bpf, "bpf_object__find_map_by_name"),
        set_max: sym!(bpf, "bpf_map__set_max_entries"),
        map_fd: sym!(bpf, "bpf_map__fd"),
        map_update: sym!(bpf, "bpf_map_update_elem"),
        map_delete: sym!(bpf, "bpf_map_delete_elem"),
        _xdp: xdp,
        _bpf: bpf,
    })
}

impl Lib {
    /// libxdp's error convention: NULL or an error-valued pointer.
    fn check(&self, p: *mut c_void) -> Result<*mut c_void, i32> {
        if p.is_null() {
            return Err(libc::ENOENT);
        }
        // SAFETY: libxdp_get_error only inspects the pointer's value.
        let e = unsafe { (self.get_error)(p) };
        if e != 0 {
            Err((-e) as i32)
        } else {
            Ok(p)
        }
    }
}

/// What is attached to an interface now.
pub(crate) struct Found {
    pub(crate) name: String,
    pub(crate) id: u32,
    pub(crate) mode: i32,
}

/// The programs attached to `ifindex` (the dispatcher's components, or
/// the one legacy program).
pub(crate) fn attached(ifindex: u32) -> Result<Vec<Found>, String> {
    let l = lib()?;
    // SAFETY: a query; the result is a multiprog we close below, or an error.
    let Ok(mp) = l.check(unsafe { (l.mp_get)(ifindex as c_int) }) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // SAFETY: `mp` is a live multiprog; its programs live as long as it.
    unsafe {
        let mode = (l.mp_mode)(mp);
        let mut p = (l.mp_next)(std::ptr::null(), mp);
        if p.is_null() {
            p = (l.mp_main)(mp);
        }
        while !p.is_null() {
            let name = CStr::from_ptr((l.prog_name)(p))
                .to_string_lossy()
                .into_owned();
            out.push(Found {
                name,
                id: (l.prog_id)(p),
                mode,
            });
            p = (l.mp_next)(p, mp);
        }
        (l.mp_close)(mp);
    }
    Ok(out)
}

/// Detaches whatever is attached to `ifindex`.
fn detach_all(ifindex: u32) -> Result<(), String> {
    let l = lib()?;
    // SAFETY: as in `attached`.
    let Ok(mp) = l.check(unsafe { (l.mp_get)(ifindex as c_int) }) else {
        return Ok(());
    };
    // SAFETY: `mp` is live; closed after the detach.
    let r = unsafe {
        let r = (l.mp_detach)(mp);
        (l.mp_close)(mp);
        r
    };
    if r < 0 {
        return Err(std::io::Error::from_raw_os_error(-r).to_string());
    }
    Ok(())
}

/// Our program attached to one interface; detached when the last socket
/// drops it.
pub(crate) struct Attachment {
    prog: *mut c_void,
    map_fd: c_int,
    ifname: String,
    ifindex: u32,
    /// The network namespace the interface is in (its inode).
    netns: u64,
    pub(crate) mode: Mode,
    state: PathBuf,
}

// SAFETY: libxdp's program object is only used under the registry lock
// (attach) or in drop, never concurrently.
unsafe impl Send for Attachment {}
// SAFETY: shared references only read plain fields and call the
// thread-safe map update syscall wrapper.
unsafe impl Sync for Attachment {}

/// This process's attachments, by network namespace and interface index
/// (an index is only unique within its namespace).
type Attachments = Mutex<Vec<((u64, u32), Weak<Attachment>)>>;

fn registry() -> &'static Attachments {
    static R: OnceLock<Attachments> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// Where the pid of the process serving an interface is kept: by name,
/// index and namespace, so that the same name and index in two
/// namespaces are two interfaces.
fn state_path(ifname: &str, ifindex: u32, netns: u64) -> PathBuf {
    PathBuf::from(format!("/run/rpmd/xdp/{ifname}.{ifindex}.{netns}"))
}

/// The calling thread's network namespace (the inode of its handle), 0
/// if it cannot be read.
fn current_netns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino())
}

fn pid_alive(pid: i32) -> bool {
    pid > 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Attaches (or shares, within this process) the program on `ifindex`.
/// `mode` None tries native, then skb.
pub(crate) fn attach(
    ifname: &str,
    ifindex: u32,
    mode: Option<Mode>,
    entries: u32,
) -> Result<Arc<Attachment>, String> {
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    reg.retain(|(_, w)| w.strong_count() > 0);
    let netns = current_netns();
    if let Some(a) = reg
        .iter()
        .find(|(k, _)| *k == (netns, ifindex))
        .and_then(|(_, w)| w.upgrade())
    {
        if mode.is_some_and(|m| m != a.mode) {
            return Err(format!(
                "{ifname} already has rpmd's program in {} mode in this process",
                a.mode.name()
            ));
        }
        return Ok(a);
    }
    let state = state_path(ifname, ifindex, netns);
    let found = attached(ifindex)?;
    if let Some(f) = found.first() {
        let owner = std::fs::read_to_string(&state)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        match owner {
            Some(pid) if f.name == DEFAULT_PROG && !pid_alive(pid) => {
                detach_all(ifindex).map_err(|e| {
                    format!("removing the program a crashed rpmd (pid {pid}) left on {ifname}: {e}")
                })?;
            }
            Some(pid) if f.name == DEFAULT_PROG => {
                return Err(format!("{ifname} is served by another rpmd process (pid {pid}); one process per interface"));
            }
            _ => {
                return Err(format!(
                    "XDP program {:?} (id {}, {} mode) is already attached to {ifname} by another program; rpmd will not replace it. Remove it if it is not in use: ip link set dev {ifname} xdp off (or xdpgeneric off)",
                    f.name,
                    f.id,
                    match f.mode { 1 => "native", 2 => "skb", 3 => "offload", _ => "unknown" }
                ));
            }
        }
    }
    let modes = match mode {
        Some(m) => vec![m],
        None => vec![Mode::Native, Mode::Skb],
    };
    let mut tried = Vec::new();
    for m in modes {
        match load_and_attach(ifindex, m, entries) {
            Ok((prog, map_fd)) => {
                let _ =
                    std::fs::create_dir_all(state.parent().unwrap_or(std::path::Path::new("/run")));
                let _ = std::fs::write(&state, format!("{}\n", std::process::id()));
                let a = Arc::new(Attachment {
                    prog,
                    map_fd,
                    ifname: ifname.to_string(),
                    ifindex,
                    netns,
                    mode: m,
                    state,
                });
                reg.push(((netns, ifindex), Arc::downgrade(&a)));
                return Ok(a);
            }
            Err(e) => tried.push(format!("{} mode: {e}", m.name())),
        }
    }
    Err(format!(
        "attaching {DEFAULT_PROG} to {ifname}: {}",
        tried.join("; ")
    ))
}

fn load_and_attach(ifindex: u32, mode: Mode, entries: u32) -> Result<(*mut c_void, c_int), String> {
    let l = lib()?;
    let sec = CString::new("xdp").map_err(|e| e.to_string())?;
    // SAFETY: NUL-terminated strings; NULL open options mean defaults.
    let prog = l
        .check(unsafe { (l.find_file)(PROG_FILE.as_ptr(), sec.as_ptr(), std::ptr::null()) })
        .map_err(|e| {
            format!(
                "{} not found ({}); install libxdp1",
                PROG_FILE.to_string_lossy(),
                std::io::Error::from_raw_os_error(e)
            )
        })?;
    // SAFETY: `prog` is a live, not yet loaded program; its object and map
    // live as long as it. Sizing the map before the load is what libbpf
    // allows; attach loads and attaches.
    unsafe {
        let obj = (l.bpf_obj)(prog);
        let map = if obj.is_null() {
            std::ptr::null_mut()
        } else {
            (l.find_map)(obj, MAP_NAME.as_ptr())
        };
        if map.is_null() {
            (l.close)(prog);
            return Err("the program has no xsks_map".into());
        }
        (l.set_max)(map, entries);
        let r = (l.attach)(prog, ifindex as c_int, mode as c_int, 0);
        if r < 0 {
            (l.close)(prog);
            let hint = if -r == libc::EPERM {
                " (loading XDP programs needs CAP_BPF and CAP_NET_ADMIN: run as root)"
            } else {
                ""
            };
            return Err(format!("{}{hint}", std::io::Error::from_raw_os_error(-r)));
        }
        let fd = (l.map_fd)(map);
        if fd < 0 {
            (l.close)(prog);
            let _ = detach_all(ifindex);
            return Err("the loaded program's xsks_map has no fd".into());
        }
        Ok((prog, fd))
    }
}

impl Attachment {
    /// Points queue `queue`'s map entry at socket `sock`.
    pub(crate) fn insert(&self, queue: u32, sock: c_int) -> Result<(), String> {
        let l = lib()?;
        // SAFETY: key and value are u32/int as the XSKMAP expects.
        let r = unsafe {
            (l.map_update)(
                self.map_fd,
                (&queue as *const u32).cast(),
                (&sock as *const c_int).cast(),
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::from_raw_os_error(-r);
            return Err(format!("adding the socket to xsks_map[{queue}]: {e}"));
        }
        Ok(())
    }

    /// Clears queue `queue`'s map entry.
    pub(crate) fn remove(&self, queue: u32) {
        if let Ok(l) = lib() {
            // SAFETY: as in `insert`.
            unsafe { (l.map_delete)(self.map_fd, (&queue as *const u32).cast()) };
        }
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if let Ok(l) = lib() {
            self.detach_ours(l);
            // SAFETY: our program object, closed once.
            unsafe { (l.close)(self.prog) };
        }
        let _ = std::fs::remove_file(&self.state);
    }
}

impl Attachment {
    /// Detaches our program, and only ours: one that replaced it while we
    /// ran (or that shares the interface's dispatcher with it) stays.
    /// Must run in the namespace the interface is in (the port's
    /// owner's), as the attach did.
    fn detach_ours(&self, l: &Lib) {
        if current_netns() != self.netns {
            eprintln!(
                "rpmd: {}: not detaching rpmd's XDP program from another network namespace",
                self.ifname
            );
            return;
        }
        // SAFETY: our live program object.
        let ours = unsafe { (l.prog_id)(self.prog) };
        match attached(self.ifindex) {
            Ok(found) if found.iter().any(|f| f.id == ours) => {
                // SAFETY: our program, attached to `ifindex` in `mode`.
                let r =
                    unsafe { (l.detach)(self.prog, self.ifindex as c_int, self.mode as c_int, 0) };
                if r < 0 {
                    eprintln!(
                        "rpmd: {}: detaching rpmd's XDP program (id {ours}): {}",
                        self.ifname,
                        std::io::Error::from_raw_os_error(-r)
                    );
                }
            }
            Ok(found) => {
                let names: Vec<String> = found
                    .iter()
                    .map(|f| format!("{} (id {})", f.name, f.id))
                    .collect();
                if !names.is_empty() {
                    eprintln!(
                        "rpmd: {}: rpmd's XDP program (id {ours}) was replaced while it ran by {}; left attached",
                        self.ifname,
                        names.join(", ")
                    );
                }
            }
            Err(_) => {}
        }
    }
}
