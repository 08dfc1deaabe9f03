//! Unbounded fuzzing of the MNS XML parser: any bytes in, errors allowed, panics not.
//! The bounded, seeded version that runs under `cargo test` is
//! `shared/queue/tests/mns_xml_fuzz.rs`; copy any crash found here into its `REGRESSIONS`.

#![no_main]

use floe_queue::mns::{decode_body, xml};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = xml::parse_message(data);
    let _ = xml::parse_change_visibility(data);
    let _ = xml::parse_error(data);
    let _ = xml::parse_failure(data);
    if let Ok(messages) = xml::parse_messages(data) {
        for m in messages {
            let _ = m.decoded_body();
        }
    }
    let _ = decode_body(&String::from_utf8_lossy(data));
});
