//! `floe-simulate`: run a block of seeds of the protocol simulation.
//!
//! ```text
//! floe-simulate [--seeds N] [--from S] [--seed S] [--trace] [--all] [--heavy] [--no-maintenance] [--appends-only]
//!               [--orphan-age-ms MS]
//!               [--rebase | --no-batch-check | --claim-error-continues | --compaction-keeps-rows
//!                | --orphans-ignore-batches | --maintain-in-flight]
//! ```
//! Prints seeds run per second; exits 1 with the first failing seed and what it broke (with
//! `--all`, after running every seed, each failing seed with the start of what it broke).

use std::time::Instant;

use floe_simulate::world::Stats;
use floe_simulate::{Options, run};

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut from, mut seeds) = (0u64, 1_000u64);
    let mut switches = Vec::new();
    let mut orphan_age = None;
    let mut flags = String::new();
    while let Some(a) = args.next() {
        if a.starts_with("--")
            && !["--seeds", "--from", "--seed", "--trace", "--all"].contains(&a.as_str())
        {
            flags.push(' ');
            flags.push_str(&a);
        }
        let mut value = || {
            args.next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| usage(&a))
        };
        match a.as_str() {
            "--seeds" => seeds = value(),
            "--from" => from = value(),
            "--seed" => {
                from = value();
                seeds = 1;
            }
            "--orphan-age-ms" => {
                let ms = value();
                flags.push_str(&format!(" {ms}"));
                orphan_age = Some(ms);
            }
            _ => switches.push(a),
        }
    }
    let mut opts = if switches.iter().any(|s| s == "--heavy") {
        Options::heavy()
    } else {
        Options::default()
    };
    for s in &switches {
        match s.as_str() {
            "--heavy" | "--all" => {}
            "--trace" => opts.trace = true,
            "--no-maintenance" => opts.maintainers = 0,
            "--appends-only" => opts.appends_only = true,
            "--rebase" => opts.rebase = true,
            "--no-batch-check" => opts.no_batch_check = true,
            "--claim-error-continues" => opts.claim_error_continues = true,
            "--compaction-keeps-rows" => opts.compaction_keeps_rows = true,
            "--orphans-ignore-batches" => opts.orphans_ignore_batches = true,
            "--maintain-in-flight" => opts.maintain_in_flight = true,
            _ => usage(s),
        }
    }
    let started = Instant::now();
    if let Some(ms) = orphan_age {
        opts.orphan_age_ms = ms as i64;
    }
    let all = switches.iter().any(|s| s == "--all");
    let mut total = Stats::default();
    let mut failed = 0;
    for seed in from..from + seeds {
        match run(seed, &opts) {
            Ok(s) => total.add(&s),
            Err(why) if all => {
                let short: String = why.chars().take(160).collect();
                eprintln!("seed {seed} FAILED: {short}");
                failed += 1;
            }
            Err(why) => {
                eprintln!("seed {seed} FAILED: {why}");
                eprintln!("replay: floe-simulate --seed {seed} --trace{flags}");
                std::process::exit(1);
            }
        }
    }
    if failed > 0 {
        eprintln!("{failed} of {seeds} seeds failed");
        std::process::exit(1);
    }
    let secs = started.elapsed().as_secs_f64();
    let t = total;
    println!(
        "{seeds} seeds ({from}..{}) clean in {secs:.1} s: {:.0} seeds/s; {} steps, {} crashes, {} stalls, {} faults; {} rows landed, {} deleted by position, {} removals; {} compactions, {} rows records moved, {} orphans removed",
        from + seeds,
        seeds as f64 / secs,
        t.steps,
        t.crashes,
        t.stalls,
        t.faults,
        t.rows_landed,
        t.rows_deleted,
        t.removals,
        t.compactions,
        t.records_moved,
        t.orphans_removed,
    );
}

fn usage(arg: &str) -> ! {
    eprintln!(
        "floe-simulate: bad argument {arg}\nusage: floe-simulate [--seeds N] [--from S] [--seed S] [--trace] [--all] [--heavy] [--no-maintenance] [--appends-only] [--orphan-age-ms MS] [--rebase | --no-batch-check | --claim-error-continues | --compaction-keeps-rows | --orphans-ignore-batches | --maintain-in-flight]"
    );
    std::process::exit(2)
}
