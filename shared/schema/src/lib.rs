//! Table schemas, type mapping and the object decoders that turn bytes into Arrow batches (pure: no IO).
