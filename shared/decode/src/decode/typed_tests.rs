//! The typed reader held against arrow-json and the conformer: the same input through a decoder
//! with it and one without must land the same rows and set aside the same records, at the same
//! lines, for the same reasons; generated records of every kind the reader takes, declines, or
//! cannot read.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use proptest::prelude::*;

use super::json::{Framing, JsonDecoder};
use super::{BadRecord, Conformer, StreamDecoder};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            true,
        ),
        Field::new("score", DataType::Float64, true),
        Field::new("n", DataType::Int32, true),
        Field::new("f", DataType::Float32, true),
        Field::new("ok", DataType::Boolean, true),
        Field::new("day", DataType::Date32, true),
        Field::new("tns", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("label", DataType::Utf8, false),
    ]))
}

/// Rows (all batches joined) and bad records (by line) of `input` fed in `chunk`-byte pieces.
fn decode(
    input: &[u8],
    framing: Framing,
    chunk: usize,
    batch_rows: usize,
    typed: bool,
) -> (RecordBatch, Vec<BadRecord>) {
    let mut d = JsonDecoder::new(
        Conformer::for_typed_source(schema(), crate::Names::CaseInsensitive),
        framing,
        batch_rows,
    )
    .unwrap();
    if !typed {
        d = d.arrow_only();
    }
    let (mut batches, mut bad) = (Vec::new(), Vec::new());
    for piece in input.chunks(chunk.max(1)) {
        d.push(piece).unwrap();
        let out = d.take();
        batches.extend(out.batches);
        bad.extend(out.bad);
    }
    d.finish().unwrap();
    let out = d.take();
    batches.extend(out.batches);
    bad.extend(out.bad);
    for b in &batches {
        assert!(b.num_rows() <= batch_rows.max(1));
        assert_eq!(b.schema(), schema());
    }
    bad.sort_by_key(|b| b.line);
    let rows = arrow_select::concat::concat_batches(&schema(), &batches).unwrap();
    (rows, bad)
}

fn agree(input: &[u8], framing: Framing, chunk: usize, batch_rows: usize) {
    let (want_rows, want_bad) = decode(input, framing, chunk, batch_rows, false);
    let (rows, bad) = decode(input, framing, chunk, batch_rows, true);
    let text = String::from_utf8_lossy(input);
    assert_eq!(bad, want_bad, "bad records differ for\n{text}");
    assert_eq!(rows, want_rows, "rows differ for\n{text}");
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Timestamps of many shapes: most RFC 3339, some not, some out of range or invalid.
fn timestamp() -> impl Strategy<Value = String> {
    (
        prop_oneof![1600i64..2300, 0i64..10_000],
        0u32..14,
        0u32..33,
        0u32..26,
        0u32..61,
        0u32..62,
        0usize..12,
        0usize..7,
        prop::bool::weighted(0.9),
    )
        .prop_map(|(y, mo, d, h, mi, s, frac, tz, t)| {
            let digits = "123456789012";
            let frac = if frac == 0 {
                String::new()
            } else {
                format!(".{}", &digits[..frac])
            };
            let tz = ["Z", "+08:00", "-05:30", "", "z", "+0800", "+24:00"][tz];
            let sep = if t { 'T' } else { ' ' };
            format!("{y:04}-{mo:02}-{d:02}{sep}{h:02}:{mi:02}:{s:02}{frac}{tz}")
        })
}

/// A JSON value as text: right for some column, wrong for others, or malformed.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<i64>().prop_map(|v| v.to_string()),
        1 => any::<i32>().prop_map(|v| v.to_string()),
        2 => any::<f64>().prop_map(|v| if v.is_finite() { format!("{v}") } else { "1e309".into() }),
        1 => any::<f32>().prop_map(|v| format!("{v:e}")),
        1 => prop::sample::select(vec![
            "0", "-0", "0.0", "1.5", "-2.25e3", "1E5", "1e-7", "01", "1.", ".5", "-", "1e400",
            "9223372036854775807", "-9223372036854775808", "9223372036854775808",
            "2147483648", "1.0", "1e2", "12abc", "1-2", "0x10", "+1",
        ]).prop_map(str::to_owned),
        3 => "[a-zA-Z0-9 é😀\\\\\"/\u{1}\t\n-]{0,12}".prop_map(|s| json_string(&s)),
        1 => prop::sample::select(vec![
            r#""\ud83d\ude00""#, r#""\ud83d""#, r#""\ude00x""#, r#""\x""#, r#""\u00E9\/""#,
            r#""\u12""#, r#""abc"#, r#""""#, r#"" ""#, r#""true""#, r#""12""#, r#""1.5""#,
            r#""2025-01-15""#, r#""19000""#, r#""1736929845000""#,
        ]).prop_map(str::to_owned),
        4 => timestamp().prop_map(|s| json_string(&s)),
        1 => any::<i64>().prop_map(|v| (v % 10_000_000_000_000).to_string()),
        2 => prop::sample::select(vec!["true", "false", "null", "tru", "nul", "nulll", "True"])
            .prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "{}", "[]", r#"{"a": [1, 2, {"b": null}], "c": "}"}"#, "[1, [2, [3]]]", "[1,]",
            r#"{"a" 1}"#, "[1 2]", r#"{"a":1,}"#, "{", "[[", r#"{"k": "\u00zz"}"#,
        ])
        .prop_map(str::to_owned),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec![
            "id", "name", "ts", "score", "n", "f", "ok", "day", "tns", "label",
        ])
        .prop_map(json_string),
        // Near misses too: a column's name with more after it, or less.
        1 => prop::sample::select(vec![
            "extra", "ID", "Name", "é", "", "na\\u006de", "x\\\"y", "idx", "nam", "ok\\\"",
        ])
            .prop_map(|k| format!("\"{k}\"")),
    ]
}

/// One record's text (no newline): usually an object, sometimes not, sometimes damaged.
fn record() -> impl Strategy<Value = Vec<u8>> {
    let fields = prop::collection::vec((key(), value()), 0..12);
    let ws = prop::sample::select(vec!["", " ", "  ", "\t", " \r "]);
    (
        fields,
        ws,
        0u8..20,
        any::<prop::sample::Index>(),
        any::<u8>(),
    )
        .prop_map(|(fields, ws, shape, at, byte)| {
            let body = fields
                .iter()
                .map(|(k, v)| format!("{k}{ws}:{ws}{v}"))
                .collect::<Vec<_>>()
                .join(&format!("{ws},{ws}"));
            let text = match shape {
                0 => format!("{{{body},}}"),
                1 => format!("[{body}]"),
                2 => "7".to_owned(),
                3 => format!("{{{body}}} {{}}"),
                4 => format!("{{{body} \"x\": 1"),
                5 => format!("{ws}{{{ws}{body}{ws}}}{ws}"),
                _ => format!("{{{body}}}"),
            };
            let mut bytes = text.into_bytes();
            match shape {
                6 if !bytes.is_empty() => {
                    // One byte changed: anything from a broken token to invalid UTF-8.
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
                7 if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes.truncate(i);
                }
                _ => {}
            }
            // A newline inside would make two lines of it.
            for b in &mut bytes {
                if *b == b'\n' {
                    *b = b' ';
                }
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ndjson_agrees_with_arrow_json(
        records in prop::collection::vec(record(), 1..30),
        chunk in prop::sample::select(vec![1usize, 7, 64, 1 << 20]),
        batch_rows in prop::sample::select(vec![1usize, 3, 1000]),
    ) {
        let input = records.join(&b'\n');
        agree(&input, Framing::Lines, chunk, batch_rows);
    }

    #[test]
    fn json_documents_agree_with_arrow_json(
        records in prop::collection::vec(record(), 1..20),
        batch_rows in prop::sample::select(vec![1usize, 4, 1000]),
    ) {
        // Only whole, well-formed records: a broken one changes how documents are split.
        let records: Vec<Vec<u8>> = records
            .into_iter()
            .filter(|r| serde_json::from_slice::<serde_json::Value>(r).is_ok())
            .collect();
        let mut input = b"[\n".to_vec();
        input.extend(records.join(&b",\n"[..]));
        input.extend_from_slice(b"\n]");
        agree(&input, Framing::Documents, 1 << 20, batch_rows);
    }
}

#[test]
fn plain_records_take_the_typed_path_and_agree() {
    let mut input = String::new();
    for i in 0..5000 {
        input.push_str(&format!(
            "{{\"id\":{i},\"name\":\"n{i}\",\"ts\":\"2025-01-{:02}T{:02}:00:00.{:03}Z\",\"score\":{}.5,\"n\":{},\"f\":0.1,\"ok\":{},\"day\":\"2025-03-01\",\"tns\":\"2025-01-15T08:30:45.123456789+01:00\",\"label\":\"x\\ty\"}}\n",
            1 + i % 28,
            i % 24,
            i % 1000,
            i,
            -i,
            i % 2 == 0
        ));
    }
    // The typed reader takes these records itself (so the comparison below is not of arrow-json
    // with itself).
    let mut typed =
        super::typed::TypedReader::new(schema(), 10, crate::Names::CaseInsensitive).unwrap();
    let mut bad = Vec::new();
    for line in input.lines() {
        assert_eq!(
            typed.read(line.as_bytes(), 1, &mut bad),
            super::typed::Read::Row,
            "{line}"
        );
    }
    // A record the typed reader declines in the middle, and bad ones either side.
    input.push_str("{\"id\": 1.0, \"label\": \"declined\"}\n{\"id\": 2}\n{\"id\": 3, \"label\": \"l\", \"ts\": \"soon\"}\n");
    for batch_rows in [1, 7, 8192] {
        agree(input.as_bytes(), Framing::Lines, 1 << 16, batch_rows);
    }
}
