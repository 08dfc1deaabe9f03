//! The event model, routes, configuration and errors shared by every floe crate (pure: no IO).
