//! Test support: local servers, protocol emulators and independent read-back checks.
