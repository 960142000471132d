//! rpmd-bind on a fake sysfs tree: listing, preflight verdicts and fixes,
//! refusals, exit codes. (Real binding is tested in the QEMU guest, under
//! tests/vm.)
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tree(tag: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("rpmd-bind-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let sys = root.join("sys");
    for (addr, id, drv, group) in [
        ("0000:00:03.0", "0x1041", "virtio-pci", 3),
        ("0000:00:04.0", "0x1000", "vfio-pci", 4),
    ] {
        let d = sys.join("bus/pci/devices").join(addr);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("vendor"), "0x1af4\n").unwrap();
        fs::write(d.join("device"), format!("{id}\n")).unwrap();
        fs::write(d.join("class"), "0x020000\n").unwrap();
        let drvdir = sys.join("bus/pci/drivers").join(drv);
        fs::create_dir_all(&drvdir).unwrap();
        symlink(&drvdir, d.join("driver")).unwrap();
        let g = sys.join(format!("kernel/iommu_groups/{group}"));
        fs::create_dir_all(g.join("devices")).unwrap();
        symlink(&g, d.join("iommu_group")).unwrap();
        symlink(&d, g.join("devices").join(addr)).unwrap();
    }
    let eth = sys.join("bus/pci/devices/0000:00:03.0/net/eth0");
    fs::create_dir_all(&eth).unwrap();
    fs::write(eth.join("operstate"), "up\n").unwrap();
    fs::create_dir_all(root.join("dev/vfio")).unwrap();
    root
}

fn run(root: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rpmd-bind"))
        .arg("--sysfs")
        .arg(root.join("sys"))
        .arg("--dev-vfio")
        .arg(root.join("dev/vfio"))
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn status_lists_devices_by_driver() {
    let root = tree("status");
    let (rc, out) = run(&root, &[]);
    assert_eq!(rc, 0, "{out}");
    let vfio = out.find("using vfio-pci").unwrap();
    let kernel = out.find("using kernel drivers").unwrap();
    let d4 = out
        .find("0000:00:04.0 1af4:1000 class=020000 drv=vfio-pci iommu_group=4")
        .unwrap();
    let d3 = out
        .find("0000:00:03.0 1af4:1041 class=020000 drv=virtio-pci iommu_group=3 if=eth0")
        .unwrap();
    assert!(vfio < d4 && d4 < kernel && kernel < d3, "{out}");
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn preflight_names_the_device_still_on_its_kernel_driver() {
    let root = tree("preflight");
    let (rc, out) = run(&root, &["--preflight", "00:03.0"]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("[ok  ] IOMMU"), "{out}");
    assert!(out.contains("[ok  ] vfio-pci"), "{out}");
    assert!(out.contains("[FAIL] VFIO container"), "{out}");
    assert!(
        out.contains("still bound to its kernel driver virtio-pci (interfaces: eth0"),
        "{out}"
    );
    assert!(
        out.contains("fix: rpmd-bind --bind vfio-pci 0000:00:03.0"),
        "{out}"
    );
    assert!(out.contains("not ready"), "{out}");
    // The vfio-bound device passes its own checks but its group node is missing.
    let (rc, out) = run(&root, &["--preflight", "0000:00:04.0"]);
    assert_eq!(rc, 1);
    assert!(
        out.contains("[ok  ] device 0000:00:04.0: 1af4:1000 bound to vfio-pci"),
        "{out}"
    );
    assert!(out.contains("IOMMU group 4: viable"), "{out}");
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn refusals_and_usage_errors() {
    let root = tree("refuse");
    let (rc, out) = run(&root, &["--bind", "vfio-pci", "00:03.0"]);
    assert_eq!(rc, 1);
    assert!(
        out.contains("interface eth0 is up") && out.contains("--force"),
        "{out}"
    );
    let (rc, out) = run(&root, &["--bind", "vfio-pci", "0000:00:3.0.1"]);
    assert_eq!(rc, 2, "{out}");
    assert!(out.contains("malformed address"), "{out}");
    let (rc, out) = run(&root, &["--bind", "vfio-pci"]);
    assert_eq!(rc, 2, "bad usage: {out}");
    assert!(out.contains("needs at least one PCI address"), "{out}");
    let (rc, out) = run(&root, &["--unbind"]);
    assert_eq!(rc, 2, "bad usage: {out}");
    let (rc, out) = run(&root, &["--bind", "vfio-pci", "00:05.0"]);
    assert_eq!(rc, 1);
    assert!(out.contains("no such device"), "{out}");
    let (rc, _) = run(&root, &["--no-such-flag"]);
    assert_eq!(rc, 2);
    fs::remove_dir_all(&root).unwrap();
}

/// `--hugepages` shows the pool before and after, and will not shrink it
/// below the pages in use unless forced. Uses the real sysfs pool (root):
/// reserves a few pages, holds some with a mempool, and puts the count
/// back as it was.
#[test]
fn hugepages_shows_before_and_after_and_keeps_pages_in_use() {
    use rpmd_pmd::hugepages::{pool, reserve};
    const SIZE: u64 = 2 << 20;
    let Ok(Some(orig)) = pool(SIZE) else {
        rpmd_pmd::testing::missing_capability("rpmd-bind hugepages", "no 2 MiB hugepage pool");
        return;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        rpmd_pmd::testing::missing_peer("rpmd-bind hugepages", "root, to write nr_hugepages");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_rpmd-bind");
    let bind = |args: &[&str]| {
        let o = std::process::Command::new(bin).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code().unwrap_or(-1), text)
    };
    let want = orig.total + 8;
    let (rc, out) = bind(&["--hugepages", &want.to_string()]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("hugepages before:") && out.contains("hugepages after:"),
        "{out}"
    );
    let now = pool(SIZE).unwrap().unwrap();
    if now.free < 4 {
        let _ = reserve(SIZE, orig.total);
        rpmd_pmd::testing::missing_capability(
            "rpmd-bind hugepages",
            "memory too fragmented for 4 free hugepages",
        );
        return;
    }
    // A pool of about 3 pages, on hugepages.
    let held = rpmd_pmd::Mempool::new(&rpmd_pmd::MempoolConfig::new("bind-huge", 2048)).unwrap();
    let in_use = pool(SIZE).unwrap().unwrap();
    assert!(in_use.free < now.free, "the mempool sits on hugepages");
    let (rc, out) = bind(&["--hugepages", "0"]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("in use") && out.contains("--force"), "{out}");
    assert_eq!(
        pool(SIZE).unwrap().unwrap().total,
        in_use.total,
        "left as it was"
    );
    drop(held);
    let (rc, out) = bind(&["--hugepages", &orig.total.to_string()]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(pool(SIZE).unwrap().unwrap().total, orig.total, "put back");
}
