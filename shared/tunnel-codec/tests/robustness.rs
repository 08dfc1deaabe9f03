//! The decoder on hostile input: 20k seeded mutations of valid blocks (and of their compressed
//! forms, and plain random bytes) must each give a record or an error, never a panic, and never
//! more records than the input could hold. `fuzz/fuzz_targets/tunnel_decode.rs` does the same
//! under libFuzzer; inputs it or this loop ever crashed on are kept in `REGRESSIONS`.

mod common;

use floe_mutate::{Mutator, Rng};
use floe_tunnel_codec::{
    BlockDecoder, BlockEncoder, Compression, ErrorKind, TableSchema, decode_block,
};
use proptest::strategy::{Strategy, ValueTree};

/// Long varints (a huge length or count) and the tunnel's own tags, worth inserting anywhere.
const TOKENS: &[&[u8]] = &[
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    &[
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ],
    &[0x80, 0xc0, 0xff, 0x7f],
    &[0xf0, 0xff, 0xff, 0x7f],
    &[0xf8, 0xff, 0xff, 0x7f],
];

/// One random edit of `b`, with pieces of `other` as donor material.
fn mutate(rng: &mut Rng, b: &mut Vec<u8>, other: &[u8]) {
    let donors = [other];
    Mutator {
        tokens: TOKENS,
        donors: if other.is_empty() { &[] } else { &donors },
    }
    .mutate_once(rng, b);
}

/// Decode fully and check what a successful decode may claim.
fn decode_checked(schema: &TableSchema, input: &[u8]) -> bool {
    match decode_block(schema, input) {
        Ok(block) => {
            // Every record costs at least its 5-byte end tag and checksum.
            assert!(block.records.len() * 5 <= input.len());
            for r in &block.records {
                assert_eq!(r.len(), schema.len());
            }
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
            assert!(e.to_string().starts_with("tunnel record block: "), "{e}");
            false
        }
    }
}

/// Valid blocks to start from: the vector blocks and seeded random ones over several schemas.
fn seeds() -> Vec<(TableSchema, Vec<u8>)> {
    let mut out = Vec::new();
    let mut runner = common::seeded_runner(1, 0xf022);
    let strategy = common::schema_and_rows(6);
    for _ in 0..24 {
        let (schema, rows) = strategy.new_tree(&mut runner).unwrap().current();
        let mut enc = BlockEncoder::new(&schema);
        for r in &rows {
            enc.write_record(r).unwrap();
        }
        let block = enc.into_block();
        out.push((schema, block));
    }
    out
}

const REGRESSIONS: &[(&str, &[u8])] = &[
    // A trailer alone, a count with no checksum, a lone end-of-record tag.
    ("bigint", &[0xf0, 0xff, 0xff, 0x7f, 0x00]),
    ("bigint", &[0x80, 0xc0, 0xff, 0x7f]),
    // An array claiming 2^32-1 elements.
    ("array<bigint>", &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]),
    // A string claiming 4 GiB.
    ("string", &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]),
    // An 11-byte varint.
    (
        "bigint",
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
    ),
];

#[test]
fn known_bad_inputs_are_errors() {
    for (t, input) in REGRESSIONS {
        let schema = TableSchema::from_type_strings([("c", *t)]).unwrap();
        assert!(!decode_checked(&schema, input), "{t} {input:02x?}");
    }
}

#[test]
fn twenty_thousand_mutated_blocks_never_panic() {
    let seeds = seeds();
    let mut rng = Rng::new(0x005e_ed0f_f022);
    let (mut ok, mut inputs) = (0usize, 0usize);
    for round in 0..16_000 {
        let (schema, block) = &seeds[round % seeds.len()];
        let other = &seeds[rng.below(seeds.len())].1;
        let mut input = block.clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input, other);
        }
        ok += usize::from(decode_checked(schema, &input));
        inputs += 1;
        // The streaming decoder stops at the first error too.
        let mut d = BlockDecoder::new(schema, &input);
        while let Ok(Some(_)) = d.next_record() {}
    }
    // Compressed blocks with corrupted bytes: the decompressors must refuse or stay in bounds.
    for round in 0..2_000 {
        let (schema, block) = &seeds[round % seeds.len()];
        let c = Compression::ALL[round % 4];
        let mut z = c.compress(block).unwrap();
        mutate(&mut rng, &mut z, &[]);
        if let Ok(raw) = c.decompress(&z, 1 << 16) {
            assert!(raw.len() <= 1 << 16);
            ok += usize::from(decode_checked(schema, &raw));
        }
        inputs += 1;
    }
    // Random bytes.
    for round in 0..2_000 {
        let (schema, _) = &seeds[round % seeds.len()];
        let n = rng.below(64);
        let input: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
        ok += usize::from(decode_checked(schema, &input));
        inputs += 1;
    }
    assert_eq!(inputs, 20_000);
    // Most mutations break a checksum; some (like truncating nothing) leave a valid block.
    assert!(ok < inputs / 2, "{ok} of {inputs} decoded");
}

#[test]
fn mutated_arrow_frames_never_panic() {
    use floe_tunnel_codec::arrow_frame::{ArrowBlockWriter, unframe_arrow_block};
    let mut rng = Rng::new(0xa770_f4a3);
    let mut intact = 0;
    for round in 0..4_000 {
        let len = rng.below(300);
        let payload: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        let mut w = ArrowBlockWriter::new(1 + (round % 97) as u32).unwrap();
        w.write(&payload);
        let mut block = w.finish();
        mutate(&mut rng, &mut block, &[]);
        match unframe_arrow_block(&block) {
            Ok((back, _)) => {
                assert!(back.len() <= block.len());
                intact += 1;
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}"),
        }
    }
    assert!(intact < 400, "{intact} mutated frames passed");
}
