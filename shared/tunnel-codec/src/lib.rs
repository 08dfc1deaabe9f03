//! The MaxCompute Tunnel protobuf record stream: encoder, decoder, checksums, upsert layout (pure: no IO).
