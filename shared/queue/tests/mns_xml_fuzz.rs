//! Seeded fuzzing of the MNS XML parser under `cargo test`: 20 000 mutations of valid
//! response documents, fixed seed, no panics allowed. The same entry point is fuzzed without
//! bounds by `fuzz/fuzz_targets/mns_xml.rs` (cargo-fuzz, nightly).
//!
//! Inputs that once broke a parser live in `REGRESSIONS` and run first.

use floe_mutate::{Mutator, Rng};
use floe_queue::mns::{decode_body, xml};

const SEED: u64 = 0x5EED_F10E_0000_0003;
const ITERATIONS: usize = 20_000;

const MESSAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Message xmlns="http://mns.aliyuncs.com/doc/v1/"><MessageId>5F290C926D472878-2-14D9529A8FA-200000001</MessageId><ReceiptHandle>1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOA==</ReceiptHandle><MessageBodyMD5>C5DD56A39F5F7BB8B3337C6D11B6D8C7</MessageBodyMD5><MessageBody>eyJldmVudHMiOltdfQ==</MessageBody><EnqueueTime>1250700979248</EnqueueTime><NextVisibleTime>1250700799348</NextVisibleTime><FirstDequeueTime>1250700779318</FirstDequeueTime><DequeueCount>1</DequeueCount><Priority>8</Priority></Message>"#;

const MESSAGES: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Messages xmlns="http://mns.aliyuncs.com/doc/v1/"><Message><MessageId>A</MessageId><ReceiptHandle>1-a</ReceiptHandle><MessageBodyMD5>X</MessageBodyMD5><MessageBody>{"a":"&lt;&amp;&#x4e2d;"}</MessageBody><EnqueueTime>1</EnqueueTime><NextVisibleTime>2</NextVisibleTime><FirstDequeueTime>1</FirstDequeueTime><DequeueCount>3</DequeueCount><Priority>8</Priority><MessageGroupId>g</MessageGroupId></Message><Message><MessageId>B</MessageId><ReceiptHandle>1-b</ReceiptHandle><MessageBodyMD5>Y</MessageBodyMD5><MessageBody><![CDATA[{"b":1}]]></MessageBody><EnqueueTime>1</EnqueueTime><NextVisibleTime>2</NextVisibleTime><FirstDequeueTime>1</FirstDequeueTime><DequeueCount>1</DequeueCount><Priority>8</Priority></Message></Messages>"#;

const CHANGE_VISIBILITY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ChangeVisibility xmlns="http://mns.aliyuncs.com/doc/v1/"><ReceiptHandle>1-new</ReceiptHandle><NextVisibleTime>1250700999348</NextVisibleTime></ChangeVisibility>"#;

const ERROR: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Error xmlns="http://mns.aliyuncs.com/doc/v1/"><Code>MessageNotExist</Code><Message>Message not exist.</Message><RequestId>5F290C926D47287800000001</RequestId><HostId>http://123.mns.cn-hangzhou.aliyuncs.com</HostId></Error>"#;

const ERRORS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Errors xmlns="http://mns.aliyuncs.com/doc/v1/"><Error><ErrorCode>ReceiptHandleError</ErrorCode><ErrorMessage>bad</ErrorMessage><ReceiptHandle>1-x</ReceiptHandle></Error><Error><ErrorCode>MessageNotExist</ErrorCode><ErrorMessage>gone</ErrorMessage><ReceiptHandle>1-y</ReceiptHandle></Error></Errors>"#;

const SEEDS: &[&str] = &[MESSAGE, MESSAGES, CHANGE_VISIBILITY, ERROR, ERRORS];

/// Fragments that tend to reach odd parser states.
const TOKENS: &[&str] = &[
    "<",
    ">",
    "</",
    "/>",
    "<?",
    "?>",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "<!DOCTYPE x>",
    "&",
    "&amp;",
    "&#",
    "&#x",
    "&#x110000;",
    "&#0;",
    "&#xD800;",
    "&bogus;",
    ";",
    "\"",
    "'",
    "=",
    "xmlns:a=\"u\"",
    "<a:Message>",
    "</a:Message>",
    "<MessageBody>",
    "</MessageBody>",
    "<DequeueCount>",
    "</DequeueCount>",
    "99999999999999999999",
    "-1",
    "\u{0}",
    "\u{feff}",
    "\u{4e2d}",
    "\r\n",
    " ",
];

/// Inputs that once made a parser panic; kept as regression cases.
const REGRESSIONS: &[&[u8]] = &[];

/// Feed one input to every parser; the results are ignored, panics are not.
fn exercise(data: &[u8]) {
    let _ = xml::parse_message(data);
    let _ = xml::parse_messages(data);
    let _ = xml::parse_change_visibility(data);
    let _ = xml::parse_error(data);
    let _ = xml::parse_failure(data);
    if let Ok(messages) = xml::parse_messages(data) {
        for m in messages {
            let _ = m.decoded_body();
        }
    }
    let _ = decode_body(&String::from_utf8_lossy(data));
}

fn run_guarded(data: &[u8], label: &str) {
    if std::panic::catch_unwind(|| exercise(data)).is_err() {
        panic!(
            "mns xml parser panicked on {label}; add it to REGRESSIONS:\n{:?}",
            String::from_utf8_lossy(data)
        );
    }
}

#[test]
fn seeds_parse_cleanly() {
    assert_eq!(
        xml::parse_message(MESSAGE.as_bytes())
            .unwrap()
            .dequeue_count,
        1
    );
    assert_eq!(xml::parse_messages(MESSAGES.as_bytes()).unwrap().len(), 2);
    assert!(xml::parse_change_visibility(CHANGE_VISIBILITY.as_bytes()).is_ok());
    assert_eq!(
        xml::parse_error(ERROR.as_bytes()).unwrap().code,
        "MessageNotExist"
    );
    assert!(xml::parse_failure(ERRORS.as_bytes()).is_ok());
}

#[test]
fn mutated_xml_never_panics() {
    for (i, r) in REGRESSIONS.iter().enumerate() {
        run_guarded(r, &format!("regression {i}"));
    }
    let tokens: Vec<&[u8]> = TOKENS.iter().map(|t| t.as_bytes()).collect();
    let nested = "<Message>".repeat(64);
    let mut tokens = tokens;
    tokens.push(nested.as_bytes());
    let donors: Vec<&[u8]> = SEEDS.iter().map(|s| s.as_bytes()).collect();
    let mutator = Mutator {
        tokens: &tokens,
        donors: &donors,
    };
    let mut rng = Rng::new(SEED);
    for i in 0..ITERATIONS {
        let seed = donors[rng.below(donors.len())];
        let input = mutator.mutant(&mut rng, seed, 8);
        run_guarded(&input, &format!("iteration {i} (seed {SEED:#x})"));
    }
}
