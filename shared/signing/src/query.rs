//! URL helpers shared by the signers (and handy to their callers): the encodings the SDKs use,
//! URL and query splitting, and
//! case-insensitive header look-up.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Everything except RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`).
pub(crate) const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// [`STRICT`] but keeping `/`: what Python's `quote(s, safe='/')` leaves alone.
pub(crate) const PATH: &AsciiSet = &STRICT.remove(b'/');

/// Percent-encode a path, keeping `/` (uppercase hex, UTF-8).
pub(crate) fn encode_path(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

/// Percent-encode a query key or value (unreserved characters only are kept).
pub fn encode_component(s: &str) -> String {
    utf8_percent_encode(s, STRICT).to_string()
}

/// Percent-decode; invalid UTF-8 becomes U+FFFD, as Python's `unquote` does.
pub(crate) fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Split a raw query on `&`, then each part at its first `=` (a part without one has an empty
/// value). Nothing is decoded. An empty query has no pairs.
pub(crate) fn split_query(query: &str) -> Vec<(&str, &str)> {
    if query.is_empty() {
        return Vec::new();
    }
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .collect()
}

/// Split a URL (or a path with a query) into its path and raw query, dropping any fragment.
/// A full URL (`scheme://host/…`) loses its scheme and authority; the path defaults to `/`.
pub fn path_and_query(url: &str) -> (&str, &str) {
    let rest = match url.find("://") {
        Some(i) => {
            let after = &url[i + 3..];
            match after.find(['/', '?', '#']) {
                Some(j) => &after[j..],
                None => "",
            }
        }
        None => url,
    };
    let rest = rest.split('#').next().unwrap_or("");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    (if path.is_empty() { "/" } else { path }, query)
}

/// The first header named `name` (ASCII case-insensitive).
pub(crate) fn header<'a>(headers: &[(&'a str, &'a str)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_sdks() {
        for (input, path, component) in [
            (
                "incoming/2025/data file+1.json",
                "incoming/2025/data%20file%2B1.json",
                "incoming%2F2025%2Fdata%20file%2B1.json",
            ),
            ("a~b-c_d.e", "a~b-c_d.e", "a~b-c_d.e"),
            ("é:", "%C3%A9%3A", "%C3%A9%3A"),
        ] {
            assert_eq!(encode_path(input), path, "{input}");
            assert_eq!(encode_component(input), component, "{input}");
            assert_eq!(decode(path), input, "{input}");
        }
    }

    #[test]
    fn splits_urls_and_queries() {
        for (url, path, query) in [
            ("https://h.example/a/b?x=1&y", "/a/b", "x=1&y"),
            ("https://h.example", "/", ""),
            ("https://h.example?x", "/", "x"),
            ("/p?q=1#frag", "/p", "q=1"),
            ("/p", "/p", ""),
        ] {
            assert_eq!(path_and_query(url), (path, query), "{url}");
        }
        assert_eq!(
            split_query("a=1&b&c=x=y"),
            vec![("a", "1"), ("b", ""), ("c", "x=y")]
        );
        assert!(split_query("").is_empty());
    }
}
