//! Seeded fuzzing of the event payload parser under `cargo test`: 20 000 mutations of the event
//! fixtures, fixed seed; every input must parse or fail with an error, never panic. The same entry
//! point is fuzzed without bounds by `fuzz/fuzz_targets/event_json.rs` (cargo-fuzz, nightly).

use floe_core::event::{ParseOptions, parse_payload};
use floe_mutate::{Mutator, Rng};

const SEED: u64 = 0x5eed_e7e4_0000_0002;
const ITERATIONS: usize = 20_000;

/// JSON fragments that reach odd parser states.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"%",
    b"%2",
    b"%FF",
    b"+",
    b"null",
    b"true",
    b"-0",
    b"1e999",
    b"18446744073709551616",
    b"\"Records\":",
    b"\"events\":",
    b"\"body\":",
    b"\"Message\":",
    b"\"eventSource\":\"aws:sqs\",",
    b"\"Type\":\"Notification\",",
    b"\"eventName\":\"ObjectCreated:Put\",",
    b"\"key\":",
];

/// Inputs that once made the parser panic; kept as regression cases.
const REGRESSIONS: &[&[u8]] = &[];

fn fixtures() -> Vec<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/events");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    assert!(out.len() >= 8, "fixtures missing from {dir}");
    out
}

fn exercise(data: &[u8]) {
    for opts in [
        ParseOptions::default(),
        ParseOptions {
            oss_keys_url_encoded: true,
        },
    ] {
        if let Ok(parsed) = parse_payload(data, &opts) {
            for c in parsed.changes() {
                let _ = (c.url(), c.file_name());
            }
        }
    }
}

#[test]
fn mutated_payloads_never_panic() {
    for r in REGRESSIONS {
        exercise(r);
    }
    let seeds = fixtures();
    let donors: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
    let mutator = Mutator {
        tokens: TOKENS,
        donors: &donors,
    };
    let mut rng = Rng::new(SEED);
    for i in 0..ITERATIONS {
        let seed = donors[rng.below(donors.len())];
        let input = mutator.mutant(&mut rng, seed, 6);
        if std::panic::catch_unwind(|| exercise(&input)).is_err() {
            panic!(
                "event parser panicked at iteration {i}; add to REGRESSIONS:\n{:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}
