//! Every case of `tests/vectors/oss_signatures.json` (oss2 V1/V4, the v2 SDK's V1/V4, and
//! OSS Tables V4), byte for byte.

mod common;

use common::{Failures, borrow, load, pairs, pinned_time, s};
use floe_signing::oss::{self, OssRequest, OssResource, OssV4Signer, V4Separator};
use floe_signing::query::{encode_component, path_and_query};
use floe_signing::{Credentials, SignedHeaders};
use serde_json::Value;

fn resource<'a>(case: &'a Value) -> OssResource<'a> {
    let bucket = s(case, "bucket");
    match case["key"].as_str() {
        Some(key) if !key.is_empty() => OssResource::Object { bucket, key },
        _ => OssResource::Bucket(bucket),
    }
}

/// oss2 takes a params dict; send it as the SDKs do: sorted, each part percent-encoded.
fn query_from_params(params: &Value) -> String {
    let mut p = pairs(params);
    p.sort();
    p.iter()
        .map(|(k, v)| {
            if v.is_empty() {
                encode_component(k)
            } else {
                format!("{}={}", encode_component(k), encode_component(v))
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn check_headers_out(f: &mut Failures, name: &str, case: &Value, signed: &SignedHeaders) {
    for (k, want) in pairs(&case["headers_out"]) {
        f.check(name, &k, signed.get(&k), &want);
    }
}

#[test]
fn oss_signatures_match_the_sdks() {
    let v = load("oss_signatures.json");
    let creds = Credentials::new(s(&v, "access_key_id"), s(&v, "access_key_secret"));
    let region = s(&v, "region");
    let mut f = Failures::default();
    let mut checked = 0;

    for case in v["oss2_v1"].as_array().unwrap() {
        let name = format!("oss2_v1/{}", s(case, "name"));
        let headers = pairs(&case["headers_in"]);
        let headers = borrow(&headers);
        let query = query_from_params(&case["params"]);
        let req = OssRequest::new(s(case, "method"), resource(case))
            .query(&query)
            .headers(&headers);
        let signed = oss::sign_v1(&creds, &req, pinned_time()).unwrap();
        f.check(&name, "date", signed.get("date"), s(case, "date"));
        f.check(
            &name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        checked += 1;
    }

    for case in v["ossv2_v1"].as_array().unwrap() {
        let name = format!("ossv2_v1/{}", s(case, "name"));
        let headers = pairs(&case["headers_in"]);
        let headers = borrow(&headers);
        let (_, query) = path_and_query(s(case, "url"));
        let req = OssRequest::new(s(case, "method"), resource(case))
            .query(query)
            .headers(&headers);
        let signed = oss::sign_v1(&creds, &req, pinned_time()).unwrap();
        check_headers_out(&mut f, &name, case, &signed);
        f.check(
            &name,
            "string_to_sign",
            Some(signed.string_to_sign()),
            s(case, "string_to_sign"),
        );
        f.check(
            &name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        checked += 1;
    }

    let oss2_v4 = OssV4Signer::oss(region).with_separator(V4Separator::CommaSpace);
    for case in v["oss2_v4"].as_array().unwrap() {
        let name = format!("oss2_v4/{}", s(case, "name"));
        let headers = pairs(&case["headers_in"]);
        let headers = borrow(&headers);
        let query = query_from_params(&case["params"]);
        let req = OssRequest::new(s(case, "method"), resource(case))
            .query(&query)
            .headers(&headers);
        let signed = oss2_v4.sign(&creds, &req, pinned_time()).unwrap();
        f.check(
            &name,
            "x-oss-date",
            signed.get("x-oss-date"),
            s(case, "x-oss-date"),
        );
        f.check(
            &name,
            "x-oss-content-sha256",
            signed.get("x-oss-content-sha256"),
            s(case, "x-oss-content-sha256"),
        );
        f.check(
            &name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        checked += 1;
    }

    let ossv2_v4 = OssV4Signer::oss(region);
    for case in v["ossv2_v4"].as_array().unwrap() {
        let name = format!("ossv2_v4/{}", s(case, "name"));
        let headers = pairs(&case["headers_in"]);
        let headers = borrow(&headers);
        let (_, query) = path_and_query(s(case, "url"));
        let req = OssRequest::new(s(case, "method"), resource(case))
            .query(query)
            .headers(&headers);
        let signed = ossv2_v4.sign(&creds, &req, pinned_time()).unwrap();
        check_headers_out(&mut f, &name, case, &signed);
        f.check(
            &name,
            "string_to_sign",
            Some(signed.string_to_sign()),
            s(case, "string_to_sign"),
        );
        f.check(
            &name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        checked += 1;
    }

    let tables = OssV4Signer::tables(region);
    for case in v["osstables_v4"].as_array().unwrap() {
        let name = format!("osstables_v4/{}", s(case, "name"));
        let headers = pairs(&case["headers_in"]);
        let headers = borrow(&headers);
        let (_, query) = path_and_query(s(case, "url"));
        let req = OssRequest::new(
            s(case, "method"),
            OssResource::Tables {
                bucket_arn: Some(s(case, "signing_bucket")),
                path: s(case, "signing_key"),
            },
        )
        .query(query)
        .headers(&headers);
        let signed = tables.sign(&creds, &req, pinned_time()).unwrap();
        f.check(
            &name,
            "x-oss-date",
            signed.get("x-oss-date"),
            s(case, "x-oss-date"),
        );
        f.check(
            &name,
            "string_to_sign",
            Some(signed.string_to_sign()),
            s(case, "string_to_sign"),
        );
        f.check(
            &name,
            "authorization",
            signed.authorization(),
            s(case, "authorization"),
        );
        checked += 1;
    }
    f.finish(checked);
    assert_eq!(checked, 15, "every case of every section is checked");
}
