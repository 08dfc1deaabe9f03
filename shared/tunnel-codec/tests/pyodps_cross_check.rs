//! The types the vector file leaves out (tinyint … int, float, date, varchar, char, timestamp_ntz,
//! interval_day_time, json, decimal(38,10), array, map, struct, nulls inside them), against a block
//! pyodps 0.13.2's C writer made of the same rows: `pyodps_all_types.py` beside this file prints it.

use floe_tunnel_codec::{
    BlockEncoder, ChecksumVarint, TableSchema, Timestamp, Value, decode_block,
};

const PYODPS_HEX: &str = "080a10d70418e0c508250000c03f288eba02320668c3a96c6c6f3a026162420180cab5ee014a038094ebdc03520d7b2261223a205b312c20325d7d5a202d31323334353637383930313233343536373839302e303132333435363738396203000178010002797a6a0200026b3100026b320200020172000e000200000000000000e03f0180c0ff7fe4dc97930208ff0125000080be2891384a8ad21f0e62006a000072010180c0ff7fca8ef6a004f0ffff7f04f8ffff7ff187a5d4feffffffff01";

fn s(text: &str) -> Value {
    Value::String(text.into())
}

#[test]
fn all_other_types_match_pyodps() {
    let schema = TableSchema::from_type_strings([
        ("t", "tinyint"),
        ("s", "smallint"),
        ("i", "int"),
        ("f", "float"),
        ("d", "date"),
        ("v", "varchar(10)"),
        ("c", "char(4)"),
        ("ntz", "timestamp_ntz"),
        ("iv", "interval_day_time"),
        ("j", "json"),
        ("big", "decimal(38,10)"),
        ("arr", "array<string>"),
        ("m", "map<string,bigint>"),
        ("st", "struct<a:int,b:array<double>>"),
    ])
    .unwrap();
    let rows = vec![
        vec![
            Value::TinyInt(5),
            Value::SmallInt(-300),
            Value::Int(70000),
            Value::Float(1.5),
            Value::Date(20103), // 2025-01-15
            s("héllo"),
            s("ab"),
            // 1969-12-31T23:59:59.25 and -1.5 s: seconds floored, nanos positive.
            Value::Timestamp(Timestamp::from_epoch_nanos(-750_000_000)),
            Value::IntervalDayTime(Timestamp::from_epoch_nanos(-1_500_000_000)),
            Value::Json(r#"{"a": [1, 2]}"#.into()),
            Value::Decimal("-12345678901234567890.0123456789".parse().unwrap()),
            Value::Array(vec![s("x"), Value::Null, s("yz")]),
            Value::Map(vec![(s("k1"), Value::BigInt(1)), (s("k2"), Value::Null)]),
            Value::Struct(vec![
                Value::Int(7),
                Value::Array(vec![Value::Double(0.5), Value::Null]),
            ]),
        ],
        vec![
            Value::TinyInt(-128),
            Value::Null,
            Value::Null,
            Value::Float(-0.25),
            Value::Date(-3593), // 1960-03-01
            Value::Null,
            Value::Null,
            Value::Null,
            Value::IntervalDayTime(Timestamp::new(3 * 86_400 + 5, 7).unwrap()),
            Value::Null,
            Value::Null,
            Value::Array(vec![]),
            Value::Map(vec![]),
            Value::Struct(vec![Value::Null, Value::Null]),
        ],
    ];
    let mut enc = BlockEncoder::new(&schema).with_checksum_varint(ChecksumVarint::SignExtended);
    for r in &rows {
        enc.write_record(r).unwrap();
    }
    let hex: String = enc.finish().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, PYODPS_HEX);

    let bytes: Vec<u8> = (0..PYODPS_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&PYODPS_HEX[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(decode_block(&schema, &bytes).unwrap().records, rows);
}
