//! MaxCompute column types, with a parser and a printer for their type strings.
//!
//! The strings are the ones MaxCompute and its SDKs use in table schemas: `bigint`, `decimal(10,2)`,
//! `varchar(64)`, `array<map<string,bigint>>`, `struct<a:int,b:string>`. Parsing is
//! case-insensitive and tolerates whitespace; printing is lowercase without spaces, and parsing the
//! printed form gives back the same [`DataType`].
//!
//! ```
//! use floe_tunnel_codec::DataType;
//! let t: DataType = "ARRAY< map<string, bigint> >".parse().unwrap();
//! assert_eq!(t.to_string(), "array<map<string,bigint>>");
//! ```

use std::fmt;
use std::str::FromStr;

use floe_core::{Error, Result};

/// How deep `array`/`map`/`struct` may nest in a parsed type string (guards the parser's stack).
pub const MAX_TYPE_DEPTH: usize = 32;

/// A MaxCompute column type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `tinyint`: 8-bit signed integer.
    TinyInt,
    /// `smallint`: 16-bit signed integer.
    SmallInt,
    /// `int`: 32-bit signed integer.
    Int,
    /// `bigint`: 64-bit signed integer.
    BigInt,
    /// `float`: 32-bit IEEE 754.
    Float,
    /// `double`: 64-bit IEEE 754.
    Double,
    /// `decimal`, `decimal(p)` or `decimal(p,s)`; see [`DecimalType`].
    Decimal(DecimalType),
    /// `boolean`.
    Boolean,
    /// `string`: bytes, UTF-8 text by convention.
    String,
    /// `varchar(n)`: text of at most `n` characters.
    Varchar(u32),
    /// `char(n)`: text of at most `n` characters.
    Char(u32),
    /// `binary`: bytes.
    Binary,
    /// `date`: days since 1970-01-01.
    Date,
    /// `datetime`: an instant in milliseconds since the epoch.
    DateTime,
    /// `timestamp`: an instant in nanoseconds since the epoch.
    Timestamp,
    /// `timestamp_ntz`: a wall-clock time with nanoseconds, no time zone.
    TimestampNtz,
    /// `interval_day_time`: a duration in seconds and nanoseconds.
    IntervalDayTime,
    /// `interval_year_month`: a duration in months.
    IntervalYearMonth,
    /// `json`: JSON text.
    Json,
    /// `array<T>`.
    Array(Box<DataType>),
    /// `map<K,V>`.
    Map(Box<DataType>, Box<DataType>),
    /// `struct<a:T,…>`: fields in declaration order.
    Struct(Vec<StructField>),
}

/// The parameters of a `decimal` type, remembering which of them the type string spelled out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecimalType {
    precision: Option<u8>,
    scale: Option<u8>,
}

impl DecimalType {
    /// Precision of a bare `decimal` (MaxCompute's 1.0 decimal type).
    pub const LEGACY_PRECISION: u8 = 54;
    /// Scale of a bare `decimal`.
    pub const LEGACY_SCALE: u8 = 18;
    /// Largest precision accepted.
    pub const MAX_PRECISION: u8 = 54;

    /// `decimal(precision,scale)`; the scale may not exceed the precision.
    pub fn new(precision: u8, scale: u8) -> Result<Self> {
        check_decimal(precision, scale)?;
        Ok(DecimalType {
            precision: Some(precision),
            scale: Some(scale),
        })
    }

    /// A bare `decimal`, printed without parameters.
    pub fn legacy() -> Self {
        DecimalType {
            precision: None,
            scale: None,
        }
    }

    /// The precision in effect: the declared one, or 54 for a bare `decimal`.
    pub fn precision(&self) -> u8 {
        self.precision.unwrap_or(Self::LEGACY_PRECISION)
    }

    /// The scale in effect: the declared one; 0 for `decimal(p)`; 18 for a bare `decimal`.
    pub fn scale(&self) -> u8 {
        match (self.precision, self.scale) {
            (_, Some(s)) => s,
            (Some(_), None) => 0,
            (None, None) => Self::LEGACY_SCALE,
        }
    }
}

fn check_decimal(precision: u8, scale: u8) -> Result<()> {
    if precision == 0 || precision > DecimalType::MAX_PRECISION {
        return Err(Error::invalid_input(format!(
            "decimal precision must be 1..={}, got {precision}",
            DecimalType::MAX_PRECISION
        )));
    }
    if scale > precision {
        return Err(Error::invalid_input(format!(
            "decimal scale {scale} exceeds its precision {precision}"
        )));
    }
    Ok(())
}

/// One field of a `struct` type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StructField {
    /// The field name.
    pub name: String,
    /// The field type.
    pub data_type: DataType,
}

impl StructField {
    /// A field named `name` of type `data_type`.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        StructField {
            name: name.into(),
            data_type,
        }
    }
}

/// The protobuf wire type a column of some [`DataType`] is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireType {
    /// 0: a varint.
    Varint = 0,
    /// 1: 8 little-endian bytes.
    Fixed64 = 1,
    /// 2: length-delimited; the record stream also uses it for values with no length prefix.
    LengthDelimited = 2,
    /// 5: 4 little-endian bytes.
    Fixed32 = 5,
}

impl DataType {
    /// The wire type of a top-level column of this type.
    pub fn wire_type(&self) -> WireType {
        match self {
            DataType::TinyInt
            | DataType::SmallInt
            | DataType::Int
            | DataType::BigInt
            | DataType::Boolean
            | DataType::Date
            | DataType::DateTime
            | DataType::IntervalYearMonth => WireType::Varint,
            DataType::Float => WireType::Fixed32,
            DataType::Double => WireType::Fixed64,
            _ => WireType::LengthDelimited,
        }
    }

    /// `array<element>`.
    pub fn array(element: DataType) -> Self {
        DataType::Array(Box::new(element))
    }

    /// `map<key,value>`.
    pub fn map(key: DataType, value: DataType) -> Self {
        DataType::Map(Box::new(key), Box::new(value))
    }

    /// `decimal(precision,scale)`.
    pub fn decimal(precision: u8, scale: u8) -> Result<Self> {
        Ok(DataType::Decimal(DecimalType::new(precision, scale)?))
    }

    /// Whether values of this type are text (`string`, `varchar`, `char`).
    pub fn is_text(&self) -> bool {
        matches!(
            self,
            DataType::String | DataType::Varchar(_) | DataType::Char(_)
        )
    }

    /// How many levels of `array`/`map`/`struct` this type nests (0 for a primitive).
    pub fn depth(&self) -> usize {
        match self {
            DataType::Array(e) => 1 + e.depth(),
            DataType::Map(k, v) => 1 + k.depth().max(v.depth()),
            DataType::Struct(fields) => {
                1 + fields
                    .iter()
                    .map(|f| f.data_type.depth())
                    .max()
                    .unwrap_or(0)
            }
            _ => 0,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::TinyInt => f.write_str("tinyint"),
            DataType::SmallInt => f.write_str("smallint"),
            DataType::Int => f.write_str("int"),
            DataType::BigInt => f.write_str("bigint"),
            DataType::Float => f.write_str("float"),
            DataType::Double => f.write_str("double"),
            DataType::Decimal(d) => match (d.precision, d.scale) {
                (Some(p), Some(s)) => write!(f, "decimal({p},{s})"),
                (Some(p), None) => write!(f, "decimal({p})"),
                _ => f.write_str("decimal"),
            },
            DataType::Boolean => f.write_str("boolean"),
            DataType::String => f.write_str("string"),
            DataType::Varchar(n) => write!(f, "varchar({n})"),
            DataType::Char(n) => write!(f, "char({n})"),
            DataType::Binary => f.write_str("binary"),
            DataType::Date => f.write_str("date"),
            DataType::DateTime => f.write_str("datetime"),
            DataType::Timestamp => f.write_str("timestamp"),
            DataType::TimestampNtz => f.write_str("timestamp_ntz"),
            DataType::IntervalDayTime => f.write_str("interval_day_time"),
            DataType::IntervalYearMonth => f.write_str("interval_year_month"),
            DataType::Json => f.write_str("json"),
            DataType::Array(e) => write!(f, "array<{e}>"),
            DataType::Map(k, v) => write!(f, "map<{k},{v}>"),
            DataType::Struct(fields) => {
                f.write_str("struct<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if is_plain_identifier(&field.name) {
                        f.write_str(&field.name)?;
                    } else {
                        write!(f, "`{}`", field.name.replace('`', "``"))?;
                    }
                    write!(f, ":{}", field.data_type)?;
                }
                f.write_str(">")
            }
        }
    }
}

fn is_plain_identifier(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl FromStr for DataType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let mut parser = Parser { text: s, pos: 0 };
        let t = parser.parse_type(0)?;
        parser.skip_ws();
        if parser.pos != s.len() {
            return Err(parser.error("unexpected text after the type"));
        }
        Ok(t)
    }
}

/// A recursive-descent parser over a type string.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, problem: &str) -> Error {
        Error::invalid_input(format!(
            "invalid maxcompute type `{}`: {problem} at offset {}",
            self.text, self.pos
        ))
    }

    fn skip_ws(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.text[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{c}`")))
        }
    }

    fn word(&mut self) -> &'a str {
        self.skip_ws();
        let start = self.pos;
        let rest = &self.text[start..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += len;
        &self.text[start..start + len]
    }

    fn number(&mut self) -> Result<u32> {
        let w = self.word();
        w.parse::<u32>()
            .map_err(|_| Error::invalid_input(format!("expected a number, got `{w}`")))
            .map_err(|e| e.while_doing(format!("invalid maxcompute type `{}`", self.text)))
    }

    fn field_name(&mut self) -> Result<String> {
        self.skip_ws();
        if self.text[self.pos..].starts_with('`') {
            self.pos += 1;
            let mut name = String::new();
            loop {
                let rest = &self.text[self.pos..];
                let Some(end) = rest.find('`') else {
                    return Err(self.error("unterminated `quoted` field name"));
                };
                name.push_str(&rest[..end]);
                self.pos += end + 1;
                if self.text[self.pos..].starts_with('`') {
                    name.push('`');
                    self.pos += 1;
                } else {
                    return Ok(name);
                }
            }
        }
        let w = self.word();
        if w.is_empty() {
            return Err(self.error("expected a field name"));
        }
        Ok(w.to_string())
    }

    fn parse_type(&mut self, depth: usize) -> Result<DataType> {
        let word = self.word().to_ascii_lowercase();
        let t = match word.as_str() {
            "tinyint" => DataType::TinyInt,
            "smallint" => DataType::SmallInt,
            "int" => DataType::Int,
            "bigint" => DataType::BigInt,
            "float" => DataType::Float,
            "double" => DataType::Double,
            "boolean" => DataType::Boolean,
            "string" => DataType::String,
            "binary" => DataType::Binary,
            "date" => DataType::Date,
            "datetime" => DataType::DateTime,
            "timestamp" => DataType::Timestamp,
            "timestamp_ntz" => DataType::TimestampNtz,
            "interval_day_time" => DataType::IntervalDayTime,
            "interval_year_month" => DataType::IntervalYearMonth,
            "json" => DataType::Json,
            "decimal" => {
                if self.eat('(') {
                    let p = self.number()?;
                    let precision = u8::try_from(p)
                        .map_err(|_| self.error("decimal precision out of range"))?;
                    let scale = if self.eat(',') {
                        let s = self.number()?;
                        Some(
                            u8::try_from(s)
                                .map_err(|_| self.error("decimal scale out of range"))?,
                        )
                    } else {
                        None
                    };
                    self.expect(')')?;
                    check_decimal(precision, scale.unwrap_or(0)).map_err(|e| {
                        e.while_doing(format!("invalid maxcompute type `{}`", self.text))
                    })?;
                    DataType::Decimal(DecimalType {
                        precision: Some(precision),
                        scale,
                    })
                } else {
                    DataType::Decimal(DecimalType::legacy())
                }
            }
            "varchar" | "char" => {
                self.expect('(')?;
                let n = self.number()?;
                self.expect(')')?;
                let max = if word == "char" { 255 } else { 65535 };
                if n == 0 || n > max {
                    return Err(self.error(&format!("{word} length must be 1..={max}")));
                }
                if word == "char" {
                    DataType::Char(n)
                } else {
                    DataType::Varchar(n)
                }
            }
            "array" | "map" | "struct" => {
                if depth >= MAX_TYPE_DEPTH {
                    return Err(self.error("types nest too deep"));
                }
                self.expect('<')?;
                let t = match word.as_str() {
                    "array" => DataType::array(self.parse_type(depth + 1)?),
                    "map" => {
                        let k = self.parse_type(depth + 1)?;
                        self.expect(',')?;
                        DataType::map(k, self.parse_type(depth + 1)?)
                    }
                    _ => {
                        let mut fields = Vec::new();
                        loop {
                            let name = self.field_name()?;
                            self.expect(':')?;
                            fields.push(StructField::new(name, self.parse_type(depth + 1)?));
                            if !self.eat(',') {
                                break;
                            }
                        }
                        DataType::Struct(fields)
                    }
                };
                self.expect('>')?;
                t
            }
            "" => return Err(self.error("expected a type name")),
            other => return Err(self.error(&format!("unknown type `{other}`"))),
        };
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_strings_round_trip() {
        let cases = [
            ("tinyint", "tinyint"),
            ("SMALLINT", "smallint"),
            ("int", "int"),
            ("bigint", "bigint"),
            ("float", "float"),
            ("double", "double"),
            ("decimal", "decimal"),
            ("decimal(10)", "decimal(10)"),
            ("decimal(10, 2)", "decimal(10,2)"),
            ("DECIMAL(38,18)", "decimal(38,18)"),
            ("boolean", "boolean"),
            ("string", "string"),
            ("varchar(64)", "varchar(64)"),
            ("char(1)", "char(1)"),
            ("binary", "binary"),
            ("date", "date"),
            ("datetime", "datetime"),
            ("timestamp", "timestamp"),
            ("timestamp_ntz", "timestamp_ntz"),
            ("interval_day_time", "interval_day_time"),
            ("interval_year_month", "interval_year_month"),
            ("json", "json"),
            ("array<bigint>", "array<bigint>"),
            (
                " array < map < string , bigint > > ",
                "array<map<string,bigint>>",
            ),
            ("struct<a:int,b:string>", "struct<a:int,b:string>"),
            (
                "STRUCT<a:INT, `b c`:ARRAY<DECIMAL(10,2)>, `x``y`:map<int,struct<z:date>>>",
                "struct<a:int,`b c`:array<decimal(10,2)>,`x``y`:map<int,struct<z:date>>>",
            ),
        ];
        for (input, printed) in cases {
            let t: DataType = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(t.to_string(), printed, "{input}");
            let again: DataType = printed.parse().unwrap();
            assert_eq!(again, t, "{input}");
        }
    }

    #[test]
    fn bad_type_strings_are_rejected_with_the_string_named() {
        for input in [
            "",
            "bigints",
            "array<>",
            "array<int",
            "map<int>",
            "struct<a int>",
            "struct<:int>",
            "decimal(0,0)",
            "decimal(10,11)",
            "decimal(300,1)",
            "varchar(0)",
            "char(256)",
            "varchar",
            "int extra",
            "struct<`a:int>",
        ] {
            let e = input.parse::<DataType>().unwrap_err();
            assert!(
                e.to_string().contains("invalid maxcompute type"),
                "{input}: {e}"
            );
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "array<".repeat(MAX_TYPE_DEPTH + 1) + "int" + &">".repeat(MAX_TYPE_DEPTH + 1);
        assert!(deep.parse::<DataType>().is_err());
        let ok = "array<".repeat(MAX_TYPE_DEPTH) + "int" + &">".repeat(MAX_TYPE_DEPTH);
        assert_eq!(ok.parse::<DataType>().unwrap().depth(), MAX_TYPE_DEPTH);
    }

    #[test]
    fn decimal_parameters_in_effect() {
        let d = |s: &str| match s.parse::<DataType>().unwrap() {
            DataType::Decimal(d) => (d.precision(), d.scale()),
            other => panic!("{other}"),
        };
        assert_eq!(d("decimal"), (54, 18));
        assert_eq!(d("decimal(10)"), (10, 0));
        assert_eq!(d("decimal(18,4)"), (18, 4));
    }

    #[test]
    fn wire_types() {
        assert_eq!(DataType::BigInt.wire_type(), WireType::Varint);
        assert_eq!(DataType::Float.wire_type(), WireType::Fixed32);
        assert_eq!(DataType::Double.wire_type(), WireType::Fixed64);
        assert_eq!(DataType::Timestamp.wire_type(), WireType::LengthDelimited);
    }
}
