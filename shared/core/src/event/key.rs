//! Object key helpers.

/// Decode one form-URL-encoded component: `+` is a space, `%XX` a byte; the bytes must be UTF-8.
/// Invalid escapes are kept as they are (a key that merely contains `%` survives); invalid UTF-8
/// after decoding falls back to the raw input.
pub fn decode_form_component(raw: &str) -> String {
    if !raw.contains(['+', '%']) {
        return raw.to_owned();
    }
    let spaced = raw.replace('+', " ");
    match percent_encoding::percent_decode_str(&spaced).decode_utf8() {
        Ok(s) => s.into_owned(),
        Err(_) => raw.to_owned(),
    }
}

/// The last `/`-separated segment of a key (the whole key when it has no `/`).
pub fn file_name(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_decoding_cases() {
        let cases = [
            ("plain/key.json", "plain/key.json"),
            ("with+space.json", "with space.json"),
            ("a%2Bb.json", "a+b.json"),
            ("dir%2Fnested%2Ffile.csv", "dir/nested/file.csv"),
            ("%E6%97%A5%E6%9C%AC/%E8%AA%9E.json", "日本/語.json"),
            ("100%25+done", "100% done"),
            ("bad%zzescape", "bad%zzescape"),
            ("%FF%FE", "%FF%FE"),
        ];
        for (raw, want) in cases {
            assert_eq!(decode_form_component(raw), want, "case {raw:?}");
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(file_name("a/b/c.json"), "c.json");
        assert_eq!(file_name("c.json"), "c.json");
        assert_eq!(file_name("a/b/"), "");
    }
}
