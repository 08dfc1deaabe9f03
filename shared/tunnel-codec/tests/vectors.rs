//! The record block against `tests/vectors/tunnel_record_block.json` (made by pyodps 0.13.2).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use floe_tunnel_codec::arrow_frame::{ArrowBlockWriter, DEFAULT_CHUNK_SIZE, unframe_arrow_block};
use floe_tunnel_codec::hasher::{HasherKind, RecordHasher};
use floe_tunnel_codec::upsert::{UpsertOperation, push_hidden_values, upsert_schema};
use floe_tunnel_codec::wire::put_varint;
use floe_tunnel_codec::{
    BlockEncoder, ChecksumVarint, Compression, DataType, TableSchema, Timestamp, Value,
    decode_block,
};
use serde_json::Value as Json;

fn vector() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/tunnel_record_block.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn b64(v: &Json) -> Vec<u8> {
    B64.decode(v.as_str().unwrap()).unwrap()
}

fn schema(v: &Json) -> TableSchema {
    let cols: Vec<(String, String)> = v["schema"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            assert_eq!(c["pb_field_number"], i + 1);
            (
                c["name"].as_str().unwrap().to_string(),
                c["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    TableSchema::from_type_strings(cols.iter().map(|(n, t)| (n.as_str(), t.as_str()))).unwrap()
}

/// The vector's logical rows as values of `schema`.
fn records(v: &Json, schema: &TableSchema) -> Vec<Vec<Value>> {
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .zip(schema.columns())
                .map(|(cell, col)| {
                    if cell.is_null() {
                        return Value::Null;
                    }
                    match &col.data_type {
                        DataType::BigInt => Value::BigInt(cell.as_i64().unwrap()),
                        DataType::Double => Value::Double(cell.as_f64().unwrap()),
                        DataType::Boolean => Value::Boolean(cell.as_bool().unwrap()),
                        DataType::String => Value::String(cell.as_str().unwrap().into()),
                        DataType::DateTime => {
                            Value::DateTime(cell["epoch_millis"].as_i64().unwrap())
                        }
                        DataType::Timestamp => Value::Timestamp(
                            Timestamp::new(
                                cell["epoch_seconds"].as_i64().unwrap(),
                                cell["nanos"].as_u64().unwrap() as u32,
                            )
                            .unwrap(),
                        ),
                        DataType::Decimal(_) => {
                            Value::Decimal(cell["decimal"].as_str().unwrap().parse().unwrap())
                        }
                        DataType::Binary => Value::Binary(b64(&cell["base64"])),
                        other => panic!("vector type {other} not mapped"),
                    }
                })
                .collect()
        })
        .collect()
}

fn encode(schema: &TableSchema, rows: &[Vec<Value>], style: ChecksumVarint) -> Vec<u8> {
    let mut enc = BlockEncoder::new(schema).with_checksum_varint(style);
    for r in rows {
        enc.write_record(r).unwrap();
    }
    enc.into_block()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn encoding_the_records_reproduces_raw_byte_for_byte() {
    let v = vector();
    let s = schema(&v);
    let rows = records(&v, &s);
    let raw = b64(&v["raw"]["base64"]);
    assert_eq!(raw.len(), v["raw"]["len"].as_u64().unwrap() as usize);
    // pyodps's C writer sign-extends checksums >= 2^31; in that style the bytes are identical.
    let ours = encode(&s, &rows, ChecksumVarint::SignExtended);
    assert_eq!(hex(&ours), hex(&raw));
}

#[test]
fn default_style_differs_from_raw_only_in_checksum_varint_width() {
    let v = vector();
    let s = schema(&v);
    let rows = records(&v, &s);
    let raw = b64(&v["raw"]["base64"]);
    // Rewrite every 10-byte (sign-extended) checksum varint of raw into its 5-byte form.
    let mut expected = hex(&raw);
    let mut rewritten = 0;
    for rec in v["decoded"]["records"].as_array().unwrap() {
        if rec["crc_varint_bytes"] == 10 {
            let crc = rec["crc32c"].as_u64().unwrap() as u32;
            let (mut long, mut short) = (Vec::new(), Vec::new());
            put_varint(&mut long, ChecksumVarint::SignExtended.varint_value(crc));
            put_varint(&mut short, ChecksumVarint::Unsigned.varint_value(crc));
            assert_eq!((long.len(), short.len()), (10, 5));
            expected = expected.replacen(&hex(&long), &hex(&short), 1);
            rewritten += 1;
        }
    }
    assert_eq!(rewritten, 1, "the vector has one checksum >= 2^31");
    let ours = encode(&s, &rows, ChecksumVarint::Unsigned);
    assert_eq!(hex(&ours), expected);
}

#[test]
fn pure_python_writer_is_the_unsigned_style_with_its_truncated_pre_epoch_timestamp() {
    let v = vector();
    let s = schema(&v);
    let mut rows = records(&v, &s);
    // The note: the python writer truncates 1969-12-31T23:59:59.5 to seconds 0 (floor gives -1).
    let ts = s.index_of("ts").unwrap();
    assert_eq!(
        rows[1][ts],
        Value::Timestamp(Timestamp::new(-1, 500_000_000).unwrap())
    );
    rows[1][ts] = Value::Timestamp(Timestamp::new(0, 500_000_000).unwrap());
    let py = b64(&v["raw_pure_python_writer"]["base64"]);
    assert_eq!(hex(&encode(&s, &rows, ChecksumVarint::Unsigned)), hex(&py));
}

#[test]
fn decoder_reads_raw_and_both_writers_back_to_the_records() {
    let v = vector();
    let s = schema(&v);
    let rows = records(&v, &s);

    let raw = decode_block(&s, &b64(&v["raw"]["base64"])).unwrap();
    assert_eq!(raw.records, rows);
    assert_eq!(
        u64::from(raw.checksum),
        v["decoded"]["trailer"]["crc_of_record_crcs"]
            .as_u64()
            .unwrap()
    );
    assert_eq!(raw.metrics, None);

    // What the pure-python writer's bytes say: record 1's timestamp is (0 s, 5e8 ns), an instant
    // one second later than the row it was given (see the vector's note).
    let py = decode_block(&s, &b64(&v["raw_pure_python_writer"]["base64"])).unwrap();
    let ts = s.index_of("ts").unwrap();
    for (i, (got, want)) in py.records.iter().zip(&rows).enumerate() {
        if i == 1 {
            assert_eq!(
                got[ts],
                Value::Timestamp(Timestamp::new(0, 500_000_000).unwrap())
            );
            assert_eq!(got[..ts], want[..ts]);
            assert_eq!(got[ts + 1..], want[ts + 1..]);
        } else {
            assert_eq!(got, want, "record {i}");
        }
    }
    assert_eq!(
        u64::from(py.checksum),
        v["decoded_pure_python"]["trailer"]["crc_of_record_crcs"]
            .as_u64()
            .unwrap()
    );
}

#[test]
fn deflate_block_inflates_to_raw_and_ours_inflates_back() {
    let v = vector();
    let raw = b64(&v["raw"]["base64"]);
    assert_eq!(
        v["deflate"]["content_encoding"],
        Compression::Deflate.content_encoding()
    );
    let theirs = b64(&v["deflate"]["base64"]);
    assert_eq!(
        Compression::Deflate.decompress(&theirs, raw.len()).unwrap(),
        raw
    );
    let ours = Compression::Deflate.compress(&raw).unwrap();
    assert_eq!(
        Compression::Deflate.decompress(&ours, raw.len()).unwrap(),
        raw
    );
    // A zlib stream: the header says deflate with a 32 KiB window, and it checks mod 31.
    assert_eq!(ours[0], 0x78);
    assert_eq!(u16::from_be_bytes([ours[0], ours[1]]) % 31, 0);
}

fn upsert_rows(rows: &[Vec<Value>]) -> Vec<Vec<Value>> {
    let mut up = rows[0].clone();
    push_hidden_values(&mut up, UpsertOperation::Upsert, None);
    let mut del = rows[1].clone();
    push_hidden_values(&mut del, UpsertOperation::Delete, None);
    vec![up, del]
}

#[test]
fn upsert_block_is_reproduced_and_decoded() {
    let v = vector();
    let s = schema(&v);
    let rows = records(&v, &s);
    let us = upsert_schema(&s).unwrap();
    let hidden: Vec<String> = v["upsert"]["hidden_columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            h.as_str()
                .unwrap()
                .split(' ')
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let ours_hidden: Vec<String> = us.columns()[s.len()..]
        .iter()
        .map(|c| format!("{} {}", c.name, c.data_type))
        .collect();
    assert_eq!(ours_hidden, hidden);

    let expected = b64(&v["upsert"]["raw_base64"]);
    let up_rows = upsert_rows(&rows);
    assert_eq!(
        hex(&encode(&us, &up_rows, ChecksumVarint::SignExtended)),
        hex(&expected)
    );
    assert_eq!(decode_block(&us, &expected).unwrap().records, up_rows);
}

#[test]
fn record_hashes_match_both_hashers() {
    let v = vector();
    let s = schema(&v);
    let rows = records(&v, &s);
    let keys: Vec<&str> = v["upsert"]["bucket_hash_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for (name, kind) in [
        ("default", HasherKind::Default),
        ("legacy", HasherKind::Legacy),
    ] {
        let hasher = RecordHasher::new(&s, kind, &keys).unwrap();
        let want: Vec<i64> = v["upsert"]["record_hash"][name]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_i64().unwrap())
            .collect();
        let got: Vec<i64> = rows
            .iter()
            .map(|r| i64::from(hasher.hash(r).unwrap()))
            .collect();
        assert_eq!(got, want, "{name}");
        for (r, h) in rows.iter().zip(&want) {
            assert_eq!(i64::from(hasher.bucket(r, 7).unwrap()), h.rem_euclid(7));
        }
    }
}

#[test]
fn arrow_block_framing_is_checked_and_reproduced() {
    let v = vector();
    let a = &v["arrow_block"];
    let block = b64(&a["bytes_base64"]);
    assert_eq!(block.len(), a["bytes_len"].as_u64().unwrap() as usize);
    let (payload, chunk) = unframe_arrow_block(&block).unwrap();
    assert_eq!(chunk, Some(DEFAULT_CHUNK_SIZE));
    assert_eq!(
        u64::from(DEFAULT_CHUNK_SIZE),
        a["chunk_size"].as_u64().unwrap()
    );
    // The payload is IPC messages: continuation marker, then a metadata length.
    assert_eq!(payload[..4], [0xff; 4]);
    let meta_len = i32::from_le_bytes(payload[4..8].try_into().unwrap());
    assert!(meta_len > 0 && (meta_len as usize) < payload.len());
    // Framing pyodps's payload again gives its bytes exactly.
    let mut w = ArrowBlockWriter::new(DEFAULT_CHUNK_SIZE).unwrap();
    w.write(&payload);
    assert_eq!(hex(&w.finish()), hex(&block));
}
