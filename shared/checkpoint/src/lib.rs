//! floe's checkpoint table: a versioned key/value store with compare-and-set, and its backends.
