//! Fuzz the event payload parser: any bytes must parse or fail cleanly.
#![no_main]

use floe_core::event::{ParseOptions, parse_payload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for opts in [ParseOptions::default(), ParseOptions { oss_keys_url_encoded: true }] {
        if let Ok(parsed) = parse_payload(data, &opts) {
            for change in parsed.changes() {
                let _ = change.url();
                let _ = change.file_name();
            }
        }
    }
});
