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

    /// Set the 2 MiB hugepage pool to N pages, showing it before and
    /// after (shrinking below the pages in use needs --force).
    #[arg(long, value_name = "N")]
    hugepages: Option<u64>,

    /// Unbind even if the device has a network interface that is up;
    /// shrink the hugepage pool below the pages in use.
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

/// Sets the 2 MiB pool to `n` pages, showing it before and after; a pool
/// would shrink below the pages in use only with `force` (the kernel
/// then keeps those as surplus pages until they are freed).
fn hugepages(n: u64, force: bool) -> Result<(), String> {
    use rpmd_pmd::hugepages::{describe, pool, reserve};
    const SIZE: u64 = 2 << 20;
    let before = pool(SIZE).map_err(|e| e.to_string())?.ok_or(
        "this kernel has no 2 MiB hugepages (no /sys/kernel/mm/hugepages/hugepages-2048kB)",
    )?;
    println!(
        "hugepages before: {}",
        describe(std::slice::from_ref(&before))
    );
    let in_use = before.total.saturating_sub(before.free);
    if n < in_use && !force {
        return Err(format!(
            "refusing to shrink the 2 MiB pool to {n} pages: {in_use} are in use (by DPDK or rpmd apps, or a mount of hugetlbfs); stop those first, or pass --force to ask the kernel anyway"
        ));
    }
    let after = reserve(SIZE, n).map_err(|e| e.to_string())?;
    println!(
        "hugepages after:  {}",
        describe(std::slice::from_ref(&after))
    );
    if after.total != n {
        println!(
            "note: the kernel holds {} pages, not the {n} asked for (too little contiguous free memory to reserve more, or pages in use that it cannot free yet)",
            after.total
        );
    }
    Ok(())
}

fn run(args: &Args, addrs: &[PciAddr]) -> Result<bool, String> {
    let s = Sysfs::new(&args.sysfs);
    let mut did = false;
    if let Some(n) = args.hugepages {
        hugepages(n, args.force)?;
        did = true;
    }
    if let Some(drv) = &args.bind {
        for &a in addrs {
            check_interfaces_down(&s, a, args.force)?;
            s.bind(a, drv).map_err(|e| e.to_string())?;
            println!("{a}: bound to {drv}");
        }
        did = true;
    }
    if args.unbind {
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
    rpmd_apps::opts::init_logging();
    let addrs: Result<Vec<PciAddr>, _> = args.devices.iter().map(|d| d.parse()).collect();
    let addrs = match addrs {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rpmd-bind: {e}");
            return ExitCode::from(2);
        }
    };
    if (args.bind.is_some() || args.unbind) && addrs.is_empty() {
        let what = if args.unbind { "--unbind" } else { "--bind" };
        eprintln!("rpmd-bind: {what} needs at least one PCI address (e.g. 0000:00:04.0)");
        return ExitCode::from(2);
    }
    match run(&args, &addrs) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("rpmd-bind: {e}");
            ExitCode::from(1)
        }
    }
}
