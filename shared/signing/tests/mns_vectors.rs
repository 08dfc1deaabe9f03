//! Every case of `tests/vectors/mns_signatures.json`, byte for byte.

mod common;

use common::{Failures, load, pinned_time, s};
use floe_signing::{Credentials, mns};

#[test]
fn mns_signatures_match_the_sdk() {
    let v = load("mns_signatures.json");
    let base = Credentials::new(s(&v, "access_key_id"), s(&v, "access_key_secret"));
    let mut f = Failures::default();
    let cases = v["cases"].as_array().unwrap();
    for case in cases {
        let name = s(case, "name");
        let creds = match case["security_token_header"].as_str() {
            Some(token) => base.clone().with_security_token(token),
            None => base.clone(),
        };
        let signed = mns::sign(
            &creds,
            s(case, "method"),
            s(case, "resource"),
            s(case, "body").as_bytes(),
            &[],
            pinned_time(),
        )
        .unwrap();
        let h = &case["headers_in_signature"];
        for (field, header) in [
            ("content-md5", "content-md5"),
            ("content-type", "content-type"),
            ("date", "date"),
            ("x-mns-version", "x-mns-version"),
        ] {
            let want = s(h, field);
            // Headers the SDK leaves empty are not sent at all.
            f.check(name, header, Some(signed.get(header).unwrap_or("")), want);
        }
        f.check(
            name,
            "string_to_sign",
            Some(signed.string_to_sign()),
            s(case, "string_to_sign"),
        );
        f.check(
            name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        match case["security_token_header"].as_str() {
            Some(token) => f.check(name, "security-token", signed.get("security-token"), token),
            None => f.check(
                name,
                "security-token absent",
                Some(if signed.get("security-token").is_none() {
                    "absent"
                } else {
                    "present"
                }),
                "absent",
            ),
        }
        // The server side accepts exactly what the client side produced.
        let mut all: Vec<(&str, &str)> = signed
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        all.push(("Host", "123.mns.cn-hangzhou.aliyuncs.com"));
        if let Err(e) = mns::verify(&creds, s(case, "method"), s(case, "resource"), &all) {
            f.check(name, "verify", Some(&e.to_string()), "ok");
        }
    }
    f.finish(cases.len());
}
