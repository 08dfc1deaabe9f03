//! `floe-simulate`: run a block of seeds of the protocol simulation.
//!
//! ```text
//! floe-simulate [--seeds N] [--from S] [--seed S] [--trace] [--heavy] [--rebase | --no-batch-check | --claim-error-continues]
//! ```
//! Prints seeds run per second; exits 1 with the first failing seed and what it broke.

use std::time::Instant;

use floe_simulate::{Options, run};

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut from, mut seeds) = (0u64, 1_000u64);
    let mut opts = Options::default();
    let mut flags = String::new();
    while let Some(a) = args.next() {
        if a.starts_with("--") && !["--seeds", "--from", "--seed", "--trace"].contains(&a.as_str())
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
            "--heavy" => {
                opts = Options {
                    rebase: opts.rebase,
                    ..Options::heavy()
                }
            }
            "--rebase" => opts.rebase = true,
            "--trace" => opts.trace = true,
            "--no-batch-check" => opts.no_batch_check = true,
            "--claim-error-continues" => opts.claim_error_continues = true,
            _ => usage(&a),
        }
    }
    let started = Instant::now();
    let (mut steps, mut crashes, mut faults, mut rows) = (0u64, 0u64, 0u64, 0u64);
    for seed in from..from + seeds {
        match run(seed, &opts) {
            Ok(s) => {
                steps += s.steps;
                crashes += s.crashes;
                faults += s.faults;
                rows += s.rows_landed;
            }
            Err(why) => {
                eprintln!("seed {seed} FAILED: {why}");
                eprintln!("replay: floe-simulate --seed {seed} --trace{flags}");
                std::process::exit(1);
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{seeds} seeds ({from}..{}) clean in {secs:.1} s: {:.0} seeds/s; {steps} steps, {crashes} crashes, {faults} faults, {rows} rows landed",
        from + seeds,
        seeds as f64 / secs
    );
}

fn usage(arg: &str) -> ! {
    eprintln!(
        "floe-simulate: bad argument {arg}\nusage: floe-simulate [--seeds N] [--from S] [--seed S] [--trace] [--heavy] [--rebase | --no-batch-check | --claim-error-continues]"
    );
    std::process::exit(2)
}
