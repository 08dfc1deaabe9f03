//! The block of seeds CI runs (`make simulate SEEDS=N` runs more), and proof that the
//! simulation finds the bugs it was built to find: with each known fix taken out, some seed
//! of a small block breaks the invariant.

use floe_simulate::{Options, run};

/// Seeds CI runs: about two seconds.
const CI_SEEDS: u64 = 2_000;

#[test]
fn a_block_of_seeds_holds_the_invariant() {
    let opts = Options::default();
    let mut faults = 0;
    let mut crashes = 0;
    for seed in 0..CI_SEEDS {
        let stats = run(seed, &opts).unwrap_or_else(|why| {
            panic!("seed {seed}: {why}\nreplay: floe-simulate --seed {seed} --trace")
        });
        faults += stats.faults;
        crashes += stats.crashes;
    }
    assert!(faults > CI_SEEDS * 10, "faults were injected: {faults}");
    assert!(crashes > CI_SEEDS, "instances crashed: {crashes}");
}

/// Seeds CI runs with [`Options::heavy`]: about two seconds more.
const CI_HEAVY_SEEDS: u64 = 800;

#[test]
fn a_block_of_heavy_seeds_holds_the_invariant() {
    let opts = Options::heavy();
    for seed in 0..CI_HEAVY_SEEDS {
        if let Err(why) = run(seed, &opts) {
            panic!("seed {seed}: {why}\nreplay: floe-simulate --heavy --seed {seed} --trace");
        }
    }
}

/// The first failing seed below `limit` with `opts`, if any.
fn first_failure(opts: &Options, limit: u64) -> Option<(u64, String)> {
    (0..limit).find_map(|seed| run(seed, opts).err().map(|why| (seed, why)))
}

/// The two guards against landing a commit's files twice cover each other: an attempt
/// re-applied on the reloaded table (the iceberg behaviour `OneAttempt` prevents) is still
/// refused by the table's batch check, and without that check it doubles rows.
#[test]
fn an_attempt_rebased_on_the_reloaded_table_is_caught_by_the_batch_check_alone() {
    let rebase = Options {
        rebase: true,
        ..Options::default()
    };
    assert_eq!(first_failure(&rebase, 2_000).map(|(s, _)| s), None);
    let neither = Options {
        rebase: true,
        no_batch_check: true,
        ..Options::default()
    };
    let (seed, why) = first_failure(&neither, 20_000).expect("the rebase bug is found");
    assert!(why.contains("rows in the table"), "seed {seed}: {why}");
}

#[test]
fn a_commit_without_the_batch_check_is_found_doubling() {
    let opts = Options {
        no_batch_check: true,
        ..Options::default()
    };
    let (seed, why) = first_failure(&opts, 20_000).expect("the stray commit bug is found");
    assert!(why.contains("rows in the table"), "seed {seed}: {why}");
}

#[test]
fn a_seed_replays_the_same_run() {
    let opts = Options::default();
    let a = run(7, &opts).unwrap();
    let b = run(7, &opts).unwrap();
    assert_eq!(
        (a.steps, a.faults, a.crashes, a.rows_landed),
        (b.steps, b.faults, b.crashes, b.rows_landed)
    );
}

#[test]
fn a_batch_going_on_without_an_object_whose_claim_failed_is_found_losing_it() {
    let opts = Options {
        claim_error_continues: true,
        ..Options::default()
    };
    let (seed, why) = first_failure(&opts, 20_000).expect("the lost claim answer is found");
    assert!(why.contains("0 rows in the table"), "seed {seed}: {why}");
}
