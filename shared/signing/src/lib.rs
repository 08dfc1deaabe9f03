//! Request signing for AWS SigV4, OSS V1/V4, MNS and MaxCompute (pure: no IO).
