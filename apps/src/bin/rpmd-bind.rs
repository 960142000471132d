//! rpmd-bind: list network devices and bind them to vfio-pci, like
//! dpdk-devbind; reserve hugepages; say what a machine lacks (preflight).
//!
//! Exit status: 0 done (preflight: nothing failed), 1 an operation or a
//! preflight check failed, 2 bad usage.
use clap::Parser;
use rpmd_pmd::pci::{PciAddr, PciDevice, Sysfs};
use rpmd_pmd::preflight::{all_ok, Preflight};
use std::process::ExitCode;

/// List network devices and bind them to vfio-pci (like dpdk-devbind),
/// reserve hugepages, check what is missing before rpmd can drive a NIC.
#[derive(Parser, Debug)]
#[command(name = "rpmd-bind", version)]
struct Args {
    /// Show network devices with their driver and IOMMU group (the default).
    #[arg(short, long)]
    status: bool,

    /// Bind the devices to DRIVER (usually vfio-pci).
    #[arg(short, long, value_name = "DRIVER")]
    bind: Option<String>,

    /// Unbind the devices from their driver.
    #[arg(short, long)]
    unbind: bool,

    /// Check IOMMU, vfio-pci, /dev/vfio, hugepages and, for each device
    /// given, its binding and group; print a fix for each problem.
    #[arg(short, long)]
    preflight: bool,

    /// Reserve this many 2 MiB hugepages.
    #[arg(long, value_name = "N")]
    hugepages: Option<u64>,

    /// Unbind even if the device has a network interface that is up.
    #[arg(long)]
    force: bool,

    /// Sysfs root (for tests).
    #[arg(long, default_value = "/sys", hide = true)]
    sysfs: String,

    /// VFIO device directory (for tests).
    #[arg(long, default_value = "/dev/vfio", hide = true)]
    dev_vfio: String,

    /// PCI addresses (DDDD:BB:DD.F or BB:DD.F).
    devices: Vec<String>,
}

fn print_device(s: &Sysfs, d: &PciDevice) {
    let group = match d.iommu_group {
        Some(g) => {
            let others: Vec<String> = s
                .group_members(g)
                .unwrap_or_default()
                .into_iter()
                .filter(|&m| m != d.addr)
                .map(|m| m.to_string())
                .collect();
            if others.is_empty() {
                format!("iommu_group={g}")
            } else {
                format!("iommu_group={g} (shared with {})", others.join(", "))
            }
        }
        None => "iommu_group=none".into(),
    };
    let ifs = if d.interfaces.is_empty() {
        String::new()
    } else {
        format!(" if={}", d.interfaces.join(","))
    };
    println!(
        "{} {} class={:06x} drv={} {group}{ifs}",
        d.addr,
        d.id,
        d.class,
        d.driver.as_deref().unwrap_or("none")
    );
}

fn status(s: &Sysfs) -> Result<(), String> {
    let devs = s.devices().map_err(|e| e.to_string())?;
    let (mut on_vfio, mut on_kernel) = (Vec::new(), Vec::new());
    for d in devs.iter().filter(|d| d.is_network()) {
        if d.driver.as_deref() == Some("vfio-pci") {
            on_vfio.push(d);
        } else {
            on_kernel.push(d);
        }
    }
    println!("Network devices using vfio-pci\n==============================");
    on_vfio.iter().for_each(|d| print_device(s, d));
    if on_vfio.is_empty() {
        println!("<none>");
    }
    println!("\nNetwork devices using kernel drivers or none\n============================================");
    on_kernel.iter().for_each(|d| print_device(s, d));
    if on_kernel.is_empty() {
        println!("<none>");
    }
    Ok(())
}

/// Refuses to take a device away from an interface that is up.
fn check_interfaces_down(s: &Sysfs, a: PciAddr, force: bool) -> Result<(), String> {
    let d = s.device(a).map_err(|e| e.to_string())?;
    for i in &d.interfaces {
        let state = std::fs::read_to_string(s.device_dir(a).join("net").join(i).join("operstate"))
            .unwrap_or_default();
        if state.trim() == "up" && !force {
            return Err(format!(
                "{a}: interface {i} is up; take it down first (ip link set {i} down) or pass --force"
            ));
        }
    }
    Ok(())
}

fn run(args: &Args, addrs: &[PciAddr]) -> Result<bool, String> {
    let s = Sysfs::new(&args.sysfs);
    let mut did = false;
    if let Some(n) = args.hugepages {
        let p = rpmd_pmd::hugepages::reserve(2 << 20, n).map_err(|e| e.to_string())?;
        println!("hugepages: {}", rpmd_pmd::hugepages::describe(&[p]));
        did = true;
    }
    if let Some(drv) = &args.bind {
        if addrs.is_empty() {
            return Err("--bind needs at least one PCI address".into());
        }
        for &a in addrs {
            check_interfaces_down(&s, a, args.force)?;
            s.bind(a, drv).map_err(|e| e.to_string())?;
            println!("{a}: bound to {drv}");
        }
        did = true;
    }
    if args.unbind {
        if addrs.is_empty() {
            return Err("--unbind needs at least one PCI address".into());
        }
        for &a in addrs {
            check_interfaces_down(&s, a, args.force)?;
            s.unbind(a).map_err(|e| e.to_string())?;
            s.clear_override(a).map_err(|e| e.to_string())?;
            println!("{a}: unbound");
        }
        did = true;
    }
    if args.preflight {
        let p = Preflight {
            sysfs: s.clone(),
            dev_vfio: args.dev_vfio.clone().into(),
            check_hugepages: args.sysfs == "/sys",
        };
        let checks = p.run(addrs);
        for c in &checks {
            println!("{c}");
        }
        let ok = all_ok(&checks);
        println!(
            "preflight: {}",
            if ok {
                "ready"
            } else {
                "not ready (see the fixes above)"
            }
        );
        return Ok(ok);
    }
    if args.status || !did {
        status(&s)?;
    }
    Ok(true)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let addrs: Result<Vec<PciAddr>, _> = args.devices.iter().map(|d| d.parse()).collect();
    let addrs = match addrs {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rpmd-bind: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args, &addrs) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("rpmd-bind: {e}");
            ExitCode::from(1)
        }
    }
}
