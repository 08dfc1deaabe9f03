//! What each function binary links: the queue clients (MNS, SQS) are in the poll function only.
//! The other functions open their pipeline without them, so the linker drops the clients even
//! in this test build, where cargo has turned floe-pipeline's `queue-clients` feature on for the
//! whole workspace. Read from the binaries' symbol tables (`nm`, which comes with the linker).

use std::process::Command;

use floe_testbed::templates::sibling_binary;

const OWN: &str = env!("CARGO_BIN_EXE_floe-poll");

/// Symbols of a queue client: the MNS client's type and the SQS SDK crate.
const QUEUE_CLIENT_MARKS: [&str; 2] = ["MnsClient", "aws_sdk_sqs"];

/// How many symbols of `binary` name each mark.
fn marks_in(binary: &std::path::Path) -> Vec<(&'static str, usize)> {
    let out = Command::new("nm")
        .arg(binary)
        .output()
        .expect("nm (binutils) runs");
    assert!(
        out.status.success(),
        "nm {}: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let symbols = String::from_utf8_lossy(&out.stdout);
    QUEUE_CLIENT_MARKS
        .iter()
        .map(|m| (*m, symbols.lines().filter(|l| l.contains(m)).count()))
        .collect()
}

#[test]
fn only_the_poll_function_links_the_queue_clients() {
    let own = std::path::Path::new(OWN);
    for (mark, n) in marks_in(own) {
        assert!(
            n > 0,
            "floe-poll links no `{mark}` symbol: the check would prove nothing"
        );
    }
    for name in ["floe-ingest", "floe-commit", "floe-backfill"] {
        let binary = sibling_binary(OWN, name);
        for (mark, n) in marks_in(&binary) {
            assert_eq!(
                n, 0,
                "{name} links {n} `{mark}` symbols: it never polls a queue"
            );
        }
    }
}
