//! Seeded fuzzing of the MNS XML parser under `cargo test`: 20 000 mutations of valid
//! response documents, fixed seed, no panics allowed. The same entry point is fuzzed without
//! bounds by `fuzz/fuzz_targets/mns_xml.rs` (cargo-fuzz, nightly).
//!
//! Inputs that once broke a parser live in `REGRESSIONS` and run first.

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

/// splitmix64: small, seedable, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let len = input.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            input[i] = rng.next() as u8;
        }
        2 => {
            let i = rng.below(len + 1);
            let b = rng.next() as u8;
            input.insert(i, b);
        }
        3 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(16)).min(len);
            input.drain(start..end);
        }
        4 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(64)).min(len);
            let chunk = input[start..end].to_vec();
            let at = rng.below(input.len() + 1);
            input.splice(at..at, chunk);
        }
        5 => {
            let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
            let at = rng.below(len + 1);
            input.splice(at..at, t.iter().copied());
        }
        6 => {
            let other = SEEDS[rng.below(SEEDS.len())].as_bytes();
            let from = rng.below(other.len());
            let to = (from + rng.below(200)).min(other.len());
            let at = rng.below(len + 1);
            input.splice(at..at, other[from..to].iter().copied());
        }
        7 if len > 0 => {
            let at = rng.below(len);
            input.truncate(at);
        }
        _ => {
            let depth = 1 + rng.below(64);
            let at = rng.below(len + 1);
            let open = "<Message>".repeat(depth);
            input.splice(at..at, open.bytes());
        }
    }
}

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
    let mut rng = Rng(SEED);
    for i in 0..ITERATIONS {
        let mut input = SEEDS[rng.below(SEEDS.len())].as_bytes().to_vec();
        for _ in 0..1 + rng.below(8) {
            mutate(&mut rng, &mut input);
        }
        run_guarded(&input, &format!("iteration {i} (seed {SEED:#x})"));
    }
}
