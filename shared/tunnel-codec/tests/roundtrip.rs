//! Round trips of random records of every type (nested, with nulls) through the encoder, each
//! compression and the decoder, with proptest at a fixed seed.

mod common;

use floe_tunnel_codec::{BlockEncoder, ChecksumVarint, Compression, decode_block};

#[test]
fn random_records_round_trip_through_every_compression() {
    let mut runner = common::seeded_runner(1000, 0x7u64 << 40 | 0x0dd5);
    runner
        .run(&common::schema_and_rows(12), |(schema, rows)| {
            for style in [ChecksumVarint::Unsigned, ChecksumVarint::SignExtended] {
                let mut enc = BlockEncoder::new(&schema).with_checksum_varint(style);
                for r in &rows {
                    enc.write_record(r).unwrap();
                }
                let block = enc.finish().to_vec();
                let decoded = decode_block(&schema, &block).unwrap();
                assert_eq!(decoded.records, rows, "schema {schema:?}");

                // Re-encoding what was decoded gives the same bytes.
                let mut again = BlockEncoder::new(&schema).with_checksum_varint(style);
                for r in &decoded.records {
                    again.write_record(r).unwrap();
                }
                assert_eq!(again.finish(), block.as_slice());

                if style == ChecksumVarint::Unsigned {
                    for c in Compression::ALL {
                        let z = c.compress(&block).unwrap();
                        let back = c.decompress(&z, block.len()).unwrap();
                        assert_eq!(back, block, "{c:?}");
                        assert_eq!(decode_block(&schema, &back).unwrap().records, rows);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_reused_encoder_cuts_blocks_at_a_byte_size() {
    let mut runner = common::seeded_runner(40, 0xb10c);
    runner
        .run(&common::schema_and_rows(60), |(schema, rows)| {
            // Cut a block whenever it passes 256 bytes; every block decodes to its share of rows.
            let mut enc = BlockEncoder::with_buffer(&schema, Vec::with_capacity(512));
            let mut blocks = Vec::new();
            for r in &rows {
                enc.write_record(r).unwrap();
                if enc.len() >= 256 {
                    blocks.push(enc.finish().to_vec());
                    enc.reset();
                }
            }
            blocks.push(enc.finish().to_vec());
            let mut all = Vec::new();
            for b in &blocks {
                all.extend(decode_block(&schema, b).unwrap().records);
            }
            assert_eq!(all, rows);
            Ok(())
        })
        .unwrap();
}
