//! Decoders end to end: formats, compression, chunking, bad records.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use floe_decode::Names;
use floe_decode::decode::{
    BadRecord, Compression, CsvOptions, Format, ParquetDecoder, detect, stream_decoder,
};

/// A decoded row: (id, name, ts micros).
type Row = (i64, Option<String>, Option<i64>);
/// A detection case: key, content type, expected result.
type DetectCase<'a> = (&'a str, Option<&'a str>, Option<(Format, Compression)>);

fn target() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            true,
        ),
        Field::new("score", DataType::Float64, true),
    ]))
}

/// Decode `input` fed in `chunk`-byte pieces; return (good rows as (id, name, ts), bad records).
fn run(
    format: &Format,
    compression: Compression,
    input: &[u8],
    chunk: usize,
    batch_rows: usize,
) -> (Vec<Row>, Vec<BadRecord>) {
    let mut d =
        stream_decoder(format, compression, target(), batch_rows, Names::default()).unwrap();
    let mut batches: Vec<RecordBatch> = Vec::new();
    let mut bad = Vec::new();
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
    // Records set aside while framing come before those set aside while converting.
    bad.sort_by_key(|b| b.line);
    let mut rows = Vec::new();
    for b in &batches {
        assert_eq!(b.schema(), target());
        assert!(b.num_rows() <= batch_rows);
        let id = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let name = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        let ts = b
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            rows.push((
                id.value(i),
                name.is_valid(i).then(|| name.value(i).to_owned()),
                ts.is_valid(i).then(|| ts.value(i)),
            ));
        }
    }
    (rows, bad)
}

const NDJSON: &str = r#"{"id": 1, "name": "a", "ts": "2025-01-15T08:30:45Z", "score": 1.5}
{"id": 2, "name": null, "ts": 1736929845000}

{"id": "three", "name": "bad id"}
{"id": 4, "name": "d", "extra": {"ignored": true}}
{"id": 5, "name": "e", "ts": "yesterday"}
{"name": "no id"}
{"id": 7, "name": "g"
{"id": 8, "name": "h\nnewline escaped", "ts": "2025-01-15 08:30:45.123"}
"#;

fn check_ndjson(rows: &[Row], bad: &[BadRecord]) {
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(ids, [1, 2, 4, 8]);
    assert_eq!(rows[0].2, Some(1_736_929_845_000_000));
    assert_eq!(rows[1].2, Some(1_736_929_845_000_000), "epoch millis");
    assert_eq!(rows[1].1, None);
    assert_eq!(rows[3].2, Some(1_736_929_845_123_000));
    let bad: Vec<(u64, &str)> = bad
        .iter()
        .map(|b| (b.line.unwrap(), b.reason.as_str()))
        .collect();
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert_eq!(bad[0].0, 4);
    assert!(bad[0].1.contains("id"), "{bad:?}");
    assert_eq!(bad[1].0, 6);
    assert!(bad[1].1.contains("field `ts`"), "{bad:?}");
    assert_eq!(bad[2].0, 7);
    assert!(bad[2].1.contains("required field `id`"), "{bad:?}");
    assert_eq!(bad[3].0, 8);
}

#[test]
fn ndjson_bad_lines_are_set_aside_at_every_chunk_size() {
    for chunk in [1, 2, 3, 7, 16, 64, 1 << 20] {
        for batch_rows in [1, 2, 3, 1000] {
            let (rows, bad) = run(
                &Format::Ndjson,
                Compression::None,
                NDJSON.as_bytes(),
                chunk,
                batch_rows,
            );
            check_ndjson(&rows, &bad);
        }
    }
}

#[test]
fn ndjson_bad_record_keeps_its_text() {
    let (_, bad) = run(
        &Format::Ndjson,
        Compression::None,
        NDJSON.as_bytes(),
        1 << 20,
        100,
    );
    assert_eq!(bad[0].raw, r#"{"id": "three", "name": "bad id"}"#);
}

#[test]
fn crlf_and_missing_final_newline() {
    let input = "{\"id\": 1}\r\n{\"id\": 2}";
    let (rows, bad) = run(&Format::Ndjson, Compression::None, input.as_bytes(), 3, 10);
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
    assert!(bad.is_empty());
}

#[test]
fn gzip_and_zstd_give_the_same_rows() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(NDJSON.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let zst = zstd::stream::encode_all(NDJSON.as_bytes(), 3).unwrap();
    for (c, bytes) in [(Compression::Gzip, gz), (Compression::Zstd, zst)] {
        for chunk in [1, 5, 4096] {
            let (rows, bad) = run(&Format::Ndjson, c, &bytes, chunk, 2);
            check_ndjson(&rows, &bad);
        }
    }
}

#[test]
fn corrupt_gzip_is_an_object_error() {
    let mut d = stream_decoder(
        &Format::Ndjson,
        Compression::Gzip,
        target(),
        10,
        Names::default(),
    )
    .unwrap();
    let err = d
        .push(b"\x1f\x8b\x08\x00garbage-garbage-garbage")
        .and_then(|_| d.finish())
        .unwrap_err();
    assert!(err.to_string().contains("corrupt gzip stream"), "{err}");
}

#[test]
fn json_arrays_and_pretty_documents() {
    let array = r#"[
  {"id": 1, "name": "a"},
  {"id": 2, "name": "b, with ] and } inside"},
  42,
  {"id": "x"}
]"#;
    for chunk in [1, 4, 1000] {
        let (rows, bad) = run(&Format::Json, Compression::None, array.as_bytes(), chunk, 2);
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(rows[1].1.as_deref(), Some("b, with ] and } inside"));
        let lines: Vec<_> = bad.iter().map(|b| b.line.unwrap()).collect();
        assert_eq!(lines, [4, 5], "{bad:?}");
    }
    let pretty = "{\n  \"id\": 7\n}\n{\n  \"id\": 8,\n  \"name\": \"z\"\n}\n";
    let (rows, bad) = run(&Format::Json, Compression::None, pretty.as_bytes(), 3, 10);
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [7, 8]);
    assert!(bad.is_empty());
}

const CSV: &str = "ID,Name,ts,score,unused\n\
1,a,2025-01-15T08:30:45Z,1.5,x\n\
2,\"multi\nline, quoted\",,2,y\n\
\n\
three,c,,,\n\
4,d,2025-01-15 08:30:45,not-a-number,z\n\
5,e,,,,too,many\n\
6,\"f \"\"quoted\"\"\"\n";

#[test]
fn csv_header_quoting_and_bad_records() {
    for chunk in [1, 3, 10, 1 << 20] {
        for batch_rows in [1, 2, 100] {
            let fmt = Format::Csv(CsvOptions::default());
            let (rows, bad) = run(&fmt, Compression::None, CSV.as_bytes(), chunk, batch_rows);
            let ids: Vec<_> = rows.iter().map(|r| r.0).collect();
            assert_eq!(ids, [1, 2, 6], "chunk {chunk} batch {batch_rows}: {bad:?}");
            assert_eq!(rows[1].1.as_deref(), Some("multi\nline, quoted"));
            assert_eq!(rows[2].1.as_deref(), Some("f \"quoted\""));
            assert_eq!(rows[2].2, None);
            let bad: Vec<_> = bad
                .iter()
                .map(|b| (b.line.unwrap(), b.reason.clone()))
                .collect();
            assert_eq!(bad.len(), 3, "{bad:?}");
            assert_eq!(bad[0].0, 6);
            assert!(bad[0].1.contains("field `id`"), "{bad:?}");
            assert_eq!(bad[1].0, 7);
            assert!(bad[1].1.contains("field `score`"), "{bad:?}");
            assert_eq!(bad[2].0, 8);
            assert!(bad[2].1.contains("7 fields"), "{bad:?}");
        }
    }
}

#[test]
fn csv_without_header_uses_table_order_and_tsv() {
    let fmt = Format::Csv(CsvOptions {
        header: false,
        delimiter: b'\t',
        ..CsvOptions::default()
    });
    let (rows, bad) = run(&fmt, Compression::None, b"1\tone\n2\ttwo\t\t3.5\n", 4, 10);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].1.as_deref(), Some("two"));
    assert!(bad.is_empty(), "{bad:?}");
    // The last record has no newline and is bad: its line is still right.
    let (rows, bad) = run(&fmt, Compression::None, b"1\t\"a\nb\"\nx\ty", 2, 10);
    assert_eq!(rows.len(), 1);
    assert_eq!(bad[0].line, Some(3), "{bad:?}");
}

#[test]
fn parquet_objects_are_matched_by_name_and_cast() {
    // A file with its own column order and narrower types.
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("ID", DataType::Int32, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec![Some("a"), Some("b"), Some("c")])),
            Arc::new(arrow_array::Int32Array::from(vec![Some(1), None, Some(3)])),
        ],
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let mut d =
        ParquetDecoder::new(bytes::Bytes::from(buf), target(), 2, Names::default()).unwrap();
    let mut ids = Vec::new();
    let mut bad = Vec::new();
    while let Some(out) = d.next_batch().unwrap() {
        for b in out.batches {
            let col = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            ids.extend(col.iter().flatten());
        }
        bad.extend(out.bad);
    }
    assert_eq!(ids, [1, 3]);
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].line, Some(2));
    assert!(bad[0].reason.contains("required field `id`"), "{bad:?}");
    assert!(bad[0].raw.contains("\"name\":\"b\""), "{bad:?}");
}

#[test]
fn format_detection() {
    let csv = Format::Csv(CsvOptions::default());
    let cases: Vec<DetectCase> = vec![
        (
            "a/b.ndjson",
            None,
            Some((Format::Ndjson, Compression::None)),
        ),
        (
            "a/b.jsonl.gz",
            None,
            Some((Format::Ndjson, Compression::Gzip)),
        ),
        ("a/b.JSON", None, Some((Format::Json, Compression::None))),
        ("a/b.csv.zst", None, Some((csv.clone(), Compression::Zstd))),
        (
            "a/b.parquet",
            None,
            Some((Format::Parquet, Compression::None)),
        ),
        (
            "a/b",
            Some("text/csv; charset=utf-8"),
            Some((csv, Compression::None)),
        ),
        (
            "a/b.gz",
            Some("application/x-ndjson"),
            Some((Format::Ndjson, Compression::Gzip)),
        ),
        ("a/b.bin", None, None),
    ];
    for (key, ct, want) in cases {
        assert_eq!(detect(key, ct, None, None), want, "{key}");
    }
    assert_eq!(
        detect("x.log", None, None, Some(&Format::Ndjson)),
        Some((Format::Ndjson, Compression::None))
    );
}

#[test]
fn large_input_streams_in_bounded_batches() {
    // 200k records through 64 KiB chunks: every batch holds at most batch_rows rows and the
    // decoder never hands back more than one batch per push (memory follows the batch).
    let mut input = String::new();
    for i in 0..200_000 {
        input.push_str(&format!(
            "{{\"id\": {i}, \"name\": \"n{i}\", \"score\": {i}.5}}\n"
        ));
    }
    let mut d = stream_decoder(
        &Format::Ndjson,
        Compression::None,
        target(),
        8192,
        Names::default(),
    )
    .unwrap();
    let mut total = 0;
    for piece in input.as_bytes().chunks(64 * 1024) {
        d.push(piece).unwrap();
        let out = d.take();
        assert!(out.batches.len() <= 1);
        total += out.batches.iter().map(|b| b.num_rows()).sum::<usize>();
    }
    d.finish().unwrap();
    total += d.take().batches.iter().map(|b| b.num_rows()).sum::<usize>();
    assert_eq!(total, 200_000);
}

/// The peak resident memory of this process (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn a_gzip_bomb_of_one_endless_line_stays_bounded() {
    // 512 MiB of one line (about 5 MiB compressed), then a good record: the line is set
    // aside as too long, the record after it decodes, and memory stays far below the line.
    const LINE: usize = 512 << 20;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let block = vec![b'a'; 1 << 20];
    for _ in 0..LINE / block.len() {
        gz.write_all(&block).unwrap();
    }
    gz.write_all(b"\n{\"id\": 7, \"name\": \"after\", \"score\": 1.5}\n")
        .unwrap();
    let bytes = gz.finish().unwrap();
    assert!(bytes.len() < 8 << 20, "{}", bytes.len());

    let before = peak_rss();
    let mut d = stream_decoder(
        &Format::Ndjson,
        Compression::Gzip,
        target(),
        1024,
        Names::default(),
    )
    .unwrap();
    let (mut rows, mut bad) = (0, Vec::new());
    for piece in bytes.chunks(64 * 1024) {
        d.push(piece).unwrap();
        let out = d.take();
        rows += out.batches.iter().map(|b| b.num_rows()).sum::<usize>();
        bad.extend(out.bad);
    }
    d.finish().unwrap();
    let out = d.take();
    rows += out.batches.iter().map(|b| b.num_rows()).sum::<usize>();
    bad.extend(out.bad);

    assert_eq!(rows, 1);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].reason.contains("longer than"), "{}", bad[0].reason);
    assert!(
        bad[0].raw.len() <= 64 << 10,
        "the letter keeps a head of the line"
    );
    let grew = peak_rss().saturating_sub(before);
    if before > 0 {
        assert!(
            grew < 300 << 20,
            "decoding a {} MiB line raised the peak by {} MiB",
            LINE >> 20,
            grew >> 20
        );
    }
}

/// The ids and names of what `names` makes of `input` in `format` (the target's `id` is
/// required: a record whose id is not found is set aside).
fn ids_and_names(format: &Format, input: &[u8], names: Names) -> (Vec<Row>, usize) {
    let mut d = stream_decoder(format, Compression::None, target(), 64, names).unwrap();
    d.push(input).unwrap();
    d.finish().unwrap();
    let out = d.take();
    let mut rows = Vec::new();
    for b in &out.batches {
        let id = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let name = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            let name = name.is_valid(i).then(|| name.value(i).to_owned());
            rows.push((id.value(i), name, None));
        }
    }
    (rows, out.bad.len())
}

#[test]
fn names_that_differ_in_case_find_their_columns_unless_matching_is_exact() {
    let some = |s: &str| Some(s.to_owned());
    // The typed reader's records (plain values), one with an exact key beside its case variant,
    // one the typed reader leaves to arrow-json (a string where a number goes is coerced there).
    let json = b"{\"ID\": 1, \"Name\": \"a\"}\n{\"id\": 2, \"NAME\": \"b\", \"name\": \"c\"}\n\
                 {\"Id\": \"3\", \"nAmE\": \"d\"}\n";
    let (rows, bad) = ids_and_names(&Format::Ndjson, json, Names::CaseInsensitive);
    assert_eq!(bad, 0);
    assert_eq!(
        rows,
        [
            (1, some("a"), None),
            (2, some("c"), None),
            (3, some("d"), None)
        ]
    );
    let (rows, bad) = ids_and_names(&Format::Ndjson, json, Names::Exact);
    assert_eq!(rows, [(2, some("c"), None)]);
    assert_eq!(bad, 2, "no `id`: the required column is missing");

    let csv = Format::Csv(CsvOptions::default());
    let text = b"ID,NAME\n1,a\n";
    let (rows, _) = ids_and_names(&csv, text, Names::CaseInsensitive);
    assert_eq!(rows, [(1, some("a"), None)]);
    let (rows, bad) = ids_and_names(&csv, text, Names::Exact);
    assert_eq!((rows.len(), bad), (0, 1));

    let schema = Arc::new(Schema::new(vec![Field::new("ID", DataType::Int64, true)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from(vec![Some(7)]))],
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let read = |names| {
        let file = bytes::Bytes::from(buf.clone());
        let mut d = ParquetDecoder::new(file, target(), 8, names).unwrap();
        let out = d.next_batch().unwrap().unwrap();
        (
            out.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
            out.bad.len(),
        )
    };
    assert_eq!(read(Names::CaseInsensitive), (1, 0));
    assert_eq!(read(Names::Exact), (0, 1));
}
