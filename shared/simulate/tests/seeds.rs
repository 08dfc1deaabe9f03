//! The block of seeds CI runs (`make simulate SEEDS=N` runs more), and proof that the
//! simulation finds the bugs it was built to find: with each known fix taken out (or each known
//! mistake put in), some seed of a small block breaks the invariant, and passes without it.

use floe_simulate::world::Stats;
use floe_simulate::{Options, run};

/// Seeds CI runs: about six seconds.
const CI_SEEDS: u64 = 2_000;

#[test]
fn a_block_of_seeds_holds_the_invariant() {
    let opts = Options::default();
    let mut t = Stats::default();
    for seed in 0..CI_SEEDS {
        let stats = run(seed, &opts).unwrap_or_else(|why| {
            panic!("seed {seed}: {why}\nreplay: floe-simulate --seed {seed} --trace")
        });
        t.add(&stats);
    }
    assert!(t.faults > CI_SEEDS * 10, "faults were injected: {t:?}");
    assert!(t.crashes > CI_SEEDS, "instances crashed: {t:?}");
    // Every path ran: replaced rows deleted, objects removed, compactions that moved records,
    // orphans removed.
    assert!(t.rows_deleted > CI_SEEDS, "rows replaced: {t:?}");
    assert!(t.removals > CI_SEEDS, "objects removed: {t:?}");
    assert!(t.compactions > CI_SEEDS, "tables compacted: {t:?}");
    assert!(t.records_moved > CI_SEEDS / 2, "records moved: {t:?}");
    assert!(t.orphans_removed > CI_SEEDS, "orphans removed: {t:?}");
}

/// Seeds CI runs with [`Options::heavy`]: about five seconds more.
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

/// The first seed below `limit` that `opts` fails and `without` passes (`without`: the same
/// run without the known bug `opts` switches on), and what broke: a failure that is the bug's.
fn found_by(opts: &Options, without: &Options, limit: u64) -> (u64, String) {
    (0..limit)
        .find_map(|seed| {
            let why = run(seed, opts).err()?;
            run(seed, without).is_ok().then_some((seed, why))
        })
        .expect("the known bug is found")
}

/// The two guards against landing a commit's files twice cover each other: an attempt
/// re-applied on the reloaded table (the iceberg behaviour `OneAttempt` prevents) is still
/// refused by the table's batch check, and without that check it doubles rows. (Both tables
/// append here: a replacing table also deletes the rows of a version it already holds.)
#[test]
fn an_attempt_rebased_on_the_reloaded_table_is_caught_by_the_batch_check_alone() {
    let rebase = Options {
        rebase: true,
        appends_only: true,
        ..Options::default()
    };
    assert_eq!(first_failure(&rebase, 2_000).map(|(s, _)| s), None);
    let neither = Options {
        no_batch_check: true,
        ..rebase.clone()
    };
    let (seed, why) = found_by(&neither, &rebase, 20_000);
    assert!(why.contains("rows in the table"), "seed {seed}: {why}");
}

/// A commit record written by a committer whose lease ran out names batches another commit
/// takes; without the batch check both land them. (Heavy faults, both tables appending: a
/// few thousand seeds.)
#[test]
fn a_commit_without_the_batch_check_is_found_doubling() {
    let appends = Options {
        appends_only: true,
        ..Options::heavy()
    };
    let opts = Options {
        no_batch_check: true,
        ..appends.clone()
    };
    let (seed, why) = found_by(&opts, &appends, 20_000);
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
    let (seed, why) = found_by(&opts, &Options::default(), 20_000);
    assert!(why.contains("0 rows in the table"), "seed {seed}: {why}");
}

/// A compaction that leaves the `rows/` records pointing at the files it rewrote: the next
/// change of an object deletes rows by position in a file the table no longer reads, and the
/// records no longer say where any object's rows are.
#[test]
fn a_compaction_that_does_not_move_the_rows_records_is_found() {
    let opts = Options {
        compaction_keeps_rows: true,
        ..Options::default()
    };
    let (seed, why) = found_by(&opts, &Options::default(), 2_000);
    assert!(why.contains("rows/ record"), "seed {seed}: {why}");
}

/// Maintenance that compacts while a commit is in flight: the commit then records where its
/// rows are in files the compaction already replaced.
#[test]
fn a_compaction_beside_a_commit_in_flight_is_found() {
    let opts = Options {
        maintain_in_flight: true,
        ..Options::default()
    };
    let (seed, why) = found_by(&opts, &Options::default(), 2_000);
    assert!(why.contains("rows/ record"), "seed {seed}: {why}");
}

/// Orphan removal that does not keep the files staged batches name removes a file a commit
/// then adds: the table reads a file that is gone. (The safe age is short here, three seconds,
/// so that staged batches wait longer than it; it still exceeds what a running batch takes
/// from writing a file to staging it, the one wait the age covers: the seed passes without
/// the bug at the same age.)
#[test]
fn orphan_removal_that_ignores_staged_batches_is_found_losing_a_file() {
    let safe = Options {
        orphan_age_ms: 3_000,
        ..Options::default()
    };
    let opts = Options {
        orphans_ignore_batches: true,
        ..safe.clone()
    };
    let (seed, why) = found_by(&opts, &safe, 20_000);
    assert!(why.contains("was removed"), "seed {seed}: {why}");
}

/// Seeds that found bugs in floe, kept as they ran.
fn holds(seed: u64, opts: &Options) {
    if let Err(why) = run(seed, opts) {
        panic!("seed {seed}: {why}");
    }
}

/// A batch read version 1 of an object, and staged it only after the object's removal (claimed
/// over its claim) had been committed. The table held nothing of the object yet, so the
/// removal recorded nothing, and version 1's rows landed after it: a removed object came back.
#[test]
fn a_version_staged_after_its_removal_was_committed_stays_out() {
    holds(8_522, &Options::default());
}

/// An object was removed twice (put, removed, put, removed). The first removal's message came
/// back late, met the second removal's claim held by a dead batch, and took it over as its
/// own: removals have no ETag, so the two looked like one version. The second removal's
/// messages were then duplicates of it, and the version between them kept its rows.
#[test]
fn a_late_removal_does_not_stand_for_a_later_one() {
    holds(6_287, &Options::default());
}

/// `floe maintain` renewed its lease, then stalled past it before its compaction's commit went
/// through. The committer that took the lease over found the compaction's record, not in the
/// table yet, and dropped it; then the compaction landed, and nothing moved the `rows/` records
/// of the files it had rewritten. Seed 18,166 ends with a record pointing at a file the table
/// no longer reads; in heavy seed 6,051 the next version's commit could not find the old rows
/// by position, and the object kept them beside its new ones. In heavy seed 16,338 such a
/// compaction lands while a commit is on its way, after the commit worked out its deletes
/// (what `AppendRequest::deletes_on` guards).
#[test]
fn a_compaction_landing_after_its_lease_ran_out_leaves_no_rows_behind() {
    holds(18_166, &Options::default());
    holds(6_051, &Options::heavy());
    holds(16_338, &Options::heavy());
}
