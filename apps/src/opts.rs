//! Command-line options the apps share: how their lcores poll.
use clap::{Args, ValueEnum};
use rpmd_sched::{LcoreConfig, PollMode, SignalKind, SpinPolicy};
use std::time::Duration;

/// Which "another thread wants this CPU" signal stops a spin early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum YieldOn {
    /// Never yield.
    Off,
    /// This thread's involuntary context switches (the cheapest live
    /// signal measured: ~0.3 µs per check).
    Preempted,
    /// System-wide CPU pressure (/proc/pressure/cpu).
    Pressure,
    /// More runnable tasks than CPUs (/proc/loadavg; machine-wide).
    Overcommitted,
    /// A sched_yield every check: the kernel switches only when another
    /// task is queued on this CPU (any process; ~0.7 us per check).
    Runqueue,
}

/// A `--poll` value: one of the run loop's presets.
pub fn poll_mode(s: &str) -> Result<PollMode, String> {
    s.parse()
}

/// How the lcores poll: a preset (`--poll`), then the fine-grained
/// options, each replacing one setting of the preset.
#[derive(Args, Clone, Debug)]
pub struct PollOpts {
    /// How the lcores poll: spin (always poll, never sleep: a CPU per
    /// lcore), interrupt (sleep on the queues' interrupts as soon as a
    /// round finds nothing), adaptive (the default: a spin budget that
    /// follows the traffic, given up when another thread wants the CPU,
    /// then sleep on interrupts).
    #[arg(long, default_value = "adaptive", value_parser = poll_mode)]
    pub poll: PollMode,
    /// A fixed spin budget in microseconds after an idle round, then sleep
    /// (0 = sleep at once; like busy_read), instead of the preset's.
    #[arg(long)]
    pub spin_us: Option<u64>,
    /// Adapt the spin budget to the traffic (0..200 us), whatever the
    /// preset.
    #[arg(long)]
    pub adaptive: bool,
    /// Stop spinning when another thread wants the CPU (default: runqueue
    /// with --poll adaptive, off otherwise).
    #[arg(long = "yield", value_enum)]
    pub yield_on: Option<YieldOn>,
    /// Longest sleep in microseconds once the budget is spent (ports
    /// without rx interrupts wake this often).
    #[arg(long, default_value_t = 100)]
    pub sleep_us: u64,
    /// Sleep with kernel busy polling: the kernel polls the devices of
    /// the lcore's sockets (af_xdp ports) for this many microseconds
    /// before the lcore blocks (0 = off; per-epoll busy polling, Linux
    /// 6.9). Pairs with the port's busy_poll_us.
    #[arg(long, default_value_t = 0)]
    pub kernel_busy_poll_us: u32,
}

impl PollOpts {
    /// The lcore configuration these options describe: the preset, with
    /// each option given replacing its setting.
    pub fn lcore_config(&self) -> LcoreConfig {
        let mut c = LcoreConfig::preset(self.poll);
        c.spin = self.spin();
        if let Some(y) = self.yield_on {
            c.signal = match y {
                YieldOn::Off => SignalKind::Off,
                YieldOn::Preempted => SignalKind::Preempted,
                YieldOn::Pressure => SignalKind::Pressure,
                YieldOn::Overcommitted => SignalKind::Overcommitted,
                YieldOn::Runqueue => SignalKind::RunQueue,
            };
        }
        c.sleep = Duration::from_micros(self.sleep_us.max(1));
        c.kernel_busy_poll = (self.kernel_busy_poll_us > 0).then_some(rpmd_sched::KernelBusyPoll {
            usecs: self.kernel_busy_poll_us,
            budget: 64,
            prefer: true,
        });
        c
    }

    /// The spin policy alone.
    pub fn spin(&self) -> SpinPolicy {
        if self.adaptive {
            SpinPolicy::adaptive()
        } else if let Some(us) = self.spin_us {
            SpinPolicy::Fixed(Duration::from_micros(us))
        } else {
            LcoreConfig::preset(self.poll).spin
        }
    }

    /// A one-line description, as the apps print it at start.
    pub fn describe(&self) -> String {
        self.lcore_config().describe()
    }
}

/// Logs (tracing) to stderr, so stdout stays for results and `--json`:
/// level from `RUST_LOG` (default info), colours only on a terminal.
pub fn init_logging() {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    // RUST_LOG in env_logger's common form ("debug", "warn,rpmd_apps=debug");
    // unset or unreadable: info and above.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing_subscriber::filter::LevelFilter::INFO)
        });
    // Colours only for a person at a terminal (and not with NO_COLOR).
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi);
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .try_init();
}

/// How long a forwarding app runs and how it reports: `--duration`,
/// `--period`, `--json`.
#[derive(Args, Clone, Debug)]
pub struct ReportOpts {
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_parser = crate::cli::seconds, allow_hyphen_values = true)]
    pub duration: Option<f64>,
    /// Seconds between statistics lines.
    #[arg(long, default_value_t = 1.0, value_parser = crate::cli::seconds, allow_hyphen_values = true)]
    pub period: f64,
    /// Machine-readable output: JSON Lines, each with a "type"
    /// ("progress" every period, "summary" at the end).
    #[arg(long)]
    pub json: bool,
}

/// DPDK telemetry, as every app serves it ([`crate::telemetry`]).
#[derive(Args, Clone, Debug)]
pub struct TelemetryOpts {
    /// DPDK telemetry's file prefix: dpdk-telemetry.py -f PREFIX connects
    /// (the socket is `<runtime dir>/dpdk/PREFIX/dpdk_telemetry.v2`).
    #[arg(long, default_value = "rte")]
    pub file_prefix: String,
    /// Serve no telemetry.
    #[arg(long)]
    pub no_telemetry: bool,
}

impl TelemetryOpts {
    /// The prefix to serve under, if telemetry is on.
    pub fn prefix(&self) -> Option<String> {
        (!self.no_telemetry).then(|| self.file_prefix.clone())
    }

    /// Starts the server for `app` unless telemetry is off (see
    /// [`crate::telemetry::serve`]).
    pub fn start(
        &self,
        app: &str,
        sources: crate::telemetry::Sources,
    ) -> Option<crate::telemetry::Server> {
        crate::telemetry::serve(app, self.prefix().as_deref(), sources)
    }
}
