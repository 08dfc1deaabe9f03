//! Queue consumers (MNS, SQS) behind one trait, with the startup modes.
