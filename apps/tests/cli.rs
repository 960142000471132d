//! Issue 26: the apps' command lines behave alike: bad usage exits 2
//! with a message naming what is wrong, before any banner or start; a
//! run-time failure exits 1.
use std::process::Command;

fn run(bin: &str, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_usage_exits_2_before_anything_starts() {
    let apps = [
        ("l2fwd", env!("CARGO_BIN_EXE_l2fwd")),
        ("gen", env!("CARGO_BIN_EXE_gen")),
        ("rr", env!("CARGO_BIN_EXE_rr")),
        ("vswitch", env!("CARGO_BIN_EXE_vswitch")),
    ];
    for (name, bin) in apps {
        for (args, want) in [
            (vec!["--duration", "-1"], "positive"),
            (vec!["--duration", "soon"], "not a number"),
            (vec!["-l", "5-1", "--duration", "1"], "runs backwards"),
            (vec!["-l", "x", "--duration", "1"], "DPDK's -l"),
            (vec!["--dev", "ring:a,", "--duration", "1"], "trailing `,`"),
            (
                vec!["--dev", "nope:x", "--duration", "1"],
                "no driver for device kind `nope`",
            ),
        ] {
            let mut args = args.clone();
            if name == "gen" && args[0] == "--dev" {
                // gen takes one --dev; the others take several.
                args.truncate(2);
                args.extend(["--duration", "1"]);
            }
            let (rc, out, err) = run(bin, &args);
            assert_eq!(rc, 2, "{name} {args:?}: {out}{err}");
            assert!(err.contains(want), "{name} {args:?}: {err}");
            assert!(
                out.is_empty(),
                "{name} {args:?}: nothing before the check: {out}"
            );
        }
    }
}

#[test]
fn a_failure_at_run_time_exits_1() {
    // A well-formed device that cannot be opened: no such interface.
    let (rc, _, err) = run(
        env!("CARGO_BIN_EXE_gen"),
        &["--dev", "af_packet:rpmd-no-such-if", "--duration", "1"],
    );
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("rpmd-no-such-if"), "{err}");
}
