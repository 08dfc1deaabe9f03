//! Fuzz the tunnel record block decoder (and the Arrow block unframer): the first byte picks a schema (and whether the rest is
//! first decompressed), the rest is the block. Any input must give records or an error, never a
//! panic, and a decoded block can hold no more records than its bytes allow.

#![no_main]

use floe_tunnel_codec::arrow_frame::unframe_arrow_block;
use floe_tunnel_codec::{Compression, TableSchema, decode_block};
use libfuzzer_sys::fuzz_target;

const SCHEMAS: &[&[(&str, &str)]] = &[
    &[
        ("id", "bigint"),
        ("score", "double"),
        ("flag", "boolean"),
        ("name", "string"),
        ("created", "datetime"),
        ("ts", "timestamp"),
        ("amount", "decimal(18,4)"),
        ("payload", "binary"),
    ],
    &[
        (
            "a",
            "array<map<string,struct<x:int,y:array<decimal(10,2)>>>>",
        ),
        ("f", "float"),
        ("t", "tinyint"),
        ("d", "date"),
        ("i", "interval_day_time"),
        ("v", "varchar(8)"),
        ("j", "json"),
    ],
    &[
        (
            "s",
            "struct<a:timestamp_ntz,b:map<bigint,binary>,c:char(3)>",
        ),
        ("m", "interval_year_month"),
    ],
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, block)) = data.split_first() else {
        return;
    };
    if let Ok((payload, _)) = unframe_arrow_block(block) {
        assert!(payload.len() <= block.len());
    }
    let Ok(schema) = TableSchema::from_type_strings(
        SCHEMAS[usize::from(selector) % SCHEMAS.len()]
            .iter()
            .copied(),
    ) else {
        return;
    };
    let inflated;
    let block = match (selector / 16) as usize {
        n @ 1..=4 => match Compression::ALL[n - 1].decompress(block, 1 << 20) {
            Ok(raw) => {
                inflated = raw;
                &inflated[..]
            }
            Err(_) => return,
        },
        _ => block,
    };
    if let Ok(decoded) = decode_block(&schema, block) {
        assert!(decoded.records.len() * 5 <= block.len());
    }
});
