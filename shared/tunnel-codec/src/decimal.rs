//! Decimal values as plain ASCII text, the form the record stream carries.
//!
//! The wire holds a decimal as its string (the Java SDK writes `toPlainString()`), so a value keeps
//! its digits exactly as given, trailing zeros included: `12.3400` stays `12.3400`. Exponent forms
//! are accepted on input and turned into plain text, so nothing with an exponent reaches the wire.

use std::fmt;
use std::str::FromStr;

use floe_core::{Error, Result};

/// The largest exponent magnitude accepted when parsing (`1e400` is refused, not expanded).
const MAX_EXPONENT: i64 = 400;

/// A decimal number held as plain text: an optional `-`, digits, optionally `.` and digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Decimal(String);

impl Decimal {
    /// The decimal `unscaled × 10^-scale`, with exactly `scale` fraction digits.
    pub fn from_unscaled(unscaled: i128, scale: u32) -> Self {
        let digits = unscaled.unsigned_abs().to_string();
        let scale = scale as usize;
        let mut s = String::with_capacity(digits.len() + scale + 3);
        if unscaled < 0 {
            s.push('-');
        }
        if scale == 0 {
            s.push_str(&digits);
        } else if digits.len() > scale {
            let (int, frac) = digits.split_at(digits.len() - scale);
            s.push_str(int);
            s.push('.');
            s.push_str(frac);
        } else {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', scale - digits.len()));
            s.push_str(&digits);
        }
        Decimal(s)
    }

    /// Parse `text`: plain (`-12.50`) or with an exponent (`1.25E+3`), with an optional sign.
    /// Plain text that is already in canonical form is kept byte for byte.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::invalid_input(format!("invalid decimal `{text}`: {why}"));
        let b = text.as_bytes();
        let mut i = 0;
        let negative = match b.first() {
            Some(b'-') => {
                i = 1;
                true
            }
            Some(b'+') => {
                i = 1;
                false
            }
            _ => false,
        };
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int = &text[int_start..i];
        let mut frac = "";
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let f = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            frac = &text[f..i];
        }
        if int.is_empty() && frac.is_empty() {
            return Err(bad("no digits"));
        }
        let mut exponent: i64 = 0;
        let has_exponent = i < b.len() && (b[i] == b'e' || b[i] == b'E');
        if has_exponent {
            let e = &text[i + 1..];
            exponent = e
                .parse::<i64>()
                .ok()
                .filter(|x| x.abs() <= MAX_EXPONENT)
                .ok_or_else(|| bad("bad exponent"))?;
            i = b.len();
        }
        if i != b.len() {
            return Err(bad("unexpected character"));
        }
        let has_point = text[..i].contains('.');
        let canonical = !has_exponent
            && b.first() != Some(&b'+')
            && !int.is_empty()
            && (!has_point || !frac.is_empty());
        if canonical {
            return Ok(Decimal(text.to_string()));
        }
        // Shift the point by the exponent over the digits int‖frac.
        let digits: String = [int, frac].concat();
        let point = int.len() as i64 + exponent; // digits left of the point
        let mut s = String::with_capacity(digits.len() + exponent.unsigned_abs() as usize + 3);
        if negative {
            s.push('-');
        }
        if point <= 0 {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', (-point) as usize));
            s.push_str(&digits);
        } else if point as usize >= digits.len() {
            s.push_str(&digits);
            s.extend(std::iter::repeat_n('0', point as usize - digits.len()));
        } else {
            s.push_str(&digits[..point as usize]);
            s.push('.');
            s.push_str(&digits[point as usize..]);
        }
        // Drop redundant leading zeros of the integer part ("007.5" → "7.5", keep "0.5").
        let sign = usize::from(negative);
        let int_len = s[sign..].find('.').unwrap_or(s.len() - sign);
        let zeros = s[sign..sign + int_len]
            .bytes()
            .take_while(|&c| c == b'0')
            .count()
            .min(int_len - 1);
        s.replace_range(sign..sign + zeros, "");
        if s.ends_with('.') {
            s.pop();
        }
        Ok(Decimal(s))
    }

    /// The plain text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the text starts with `-`.
    pub fn is_negative(&self) -> bool {
        self.0.starts_with('-')
    }

    /// The integer digits (without sign) and the fraction digits (empty when there is no point).
    pub fn digits(&self) -> (&str, &str) {
        let unsigned = self.0.strip_prefix('-').unwrap_or(&self.0);
        unsigned.split_once('.').unwrap_or((unsigned, ""))
    }

    /// How many digits the integer part needs (leading zeros do not count; `0.5` needs none).
    pub fn integer_digits(&self) -> usize {
        self.digits().0.trim_start_matches('0').len()
    }
}

impl FromStr for Decimal {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Decimal::parse(s)
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_plain_text_and_expands_exponents() {
        for (input, plain) in [
            ("12.3400", "12.3400"),
            ("-0.0001", "-0.0001"),
            ("0", "0"),
            ("-0", "-0"),
            ("007", "007"),
            ("99999999999999.9999", "99999999999999.9999"),
            ("+1.5", "1.5"),
            ("1.", "1"),
            (".5", "0.5"),
            ("-.5", "-0.5"),
            ("1E+3", "1000"),
            ("1.25e3", "1250"),
            ("1.25E-3", "0.00125"),
            ("-12.5e-1", "-1.25"),
            ("123e-1", "12.3"),
            ("0.0e0", "0.0"),
            ("5E-1", "0.5"),
        ] {
            let d = Decimal::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(d.as_str(), plain, "{input}");
        }
    }

    #[test]
    fn parse_rejects_non_numbers() {
        for input in [
            "", "-", "+", ".", "1.2.3", "abc", "NaN", "Infinity", "1e", "1e+", "1e999", " 1", "1 ",
            "--1", "1_000",
        ] {
            assert!(Decimal::parse(input).is_err(), "{input}");
        }
    }

    #[test]
    fn from_unscaled_writes_exactly_scale_digits() {
        assert_eq!(Decimal::from_unscaled(123400, 4).as_str(), "12.3400");
        assert_eq!(Decimal::from_unscaled(-1, 4).as_str(), "-0.0001");
        assert_eq!(Decimal::from_unscaled(5, 0).as_str(), "5");
        assert_eq!(Decimal::from_unscaled(0, 2).as_str(), "0.00");
        assert_eq!(
            Decimal::from_unscaled(i128::MIN, 0).as_str(),
            "-170141183460469231731687303715884105728"
        );
    }

    #[test]
    fn integer_digits_ignore_leading_zeros() {
        assert_eq!(Decimal::parse("0.5").unwrap().integer_digits(), 0);
        assert_eq!(Decimal::parse("-120.5").unwrap().integer_digits(), 3);
        assert_eq!(Decimal::parse("007").unwrap().integer_digits(), 1);
    }
}
