//! Every case of `tests/vectors/odps_signatures.json`, byte for byte.

mod common;

use common::{Failures, borrow, load, pairs, pinned_time, s};
use floe_signing::Credentials;
use floe_signing::odps::{self, OdpsSignature};

#[test]
fn odps_signatures_match_the_sdk() {
    let v = load("odps_signatures.json");
    let creds = Credentials::new(s(&v, "access_key_id"), s(&v, "access_key_secret"));
    let mut f = Failures::default();
    let cases = v["cases"].as_array().unwrap();
    for case in cases {
        let name = s(case, "name");
        let mut headers = pairs(&case["headers_in"]);
        headers.push(("Date".into(), s(case, "date").into()));
        let signature = match case["region_name"].as_str() {
            None => OdpsSignature::Classic,
            Some(region) => OdpsSignature::V4 {
                region: region.into(),
            },
        };
        let signed = odps::sign(
            &creds,
            &signature,
            s(case, "method"),
            s(case, "path_and_query"),
            &borrow(&headers),
            pinned_time(),
        )
        .unwrap();
        f.check(
            name,
            "canonical_string",
            Some(signed.string_to_sign()),
            s(case, "canonical_string"),
        );
        f.check(
            name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        let mut received = borrow(&headers);
        let auth = s(case, "authorization");
        received.push(("Authorization", auth));
        f.check(
            name,
            "verify accepts the sdk's authorization",
            Some(
                match odps::verify(
                    &creds,
                    s(case, "method"),
                    s(case, "path_and_query"),
                    &received,
                ) {
                    Ok(()) => "ok",
                    Err(_) => "refused",
                },
            ),
            "ok",
        );
        f.check(
            name,
            "no Date added when given",
            Some(if signed.get("date").is_none() {
                "none"
            } else {
                "added"
            }),
            "none",
        );
    }
    f.finish(cases.len());
}
