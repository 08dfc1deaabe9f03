//! Object stores floe reads from: a local folder, S3 and OSS.
