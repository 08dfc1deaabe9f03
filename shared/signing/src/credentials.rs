//! Access keys for every scheme: an id, a secret and an optional STS / session token.

use floe_core::Secret;

/// An access key pair plus an optional security (STS / session) token.
///
/// `Debug` prints the id only; the secret and token are [`Secret`]s and print `***`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    access_key_id: String,
    access_key_secret: Secret,
    security_token: Option<Secret>,
}

impl Credentials {
    /// Long-lived keys: an access key id and its secret.
    pub fn new(access_key_id: impl Into<String>, access_key_secret: impl Into<Secret>) -> Self {
        Credentials {
            access_key_id: access_key_id.into(),
            access_key_secret: access_key_secret.into(),
            security_token: None,
        }
    }

    /// The same keys with an STS (Alibaba) or session (AWS) token; an empty token means none.
    pub fn with_security_token(mut self, token: impl Into<Secret>) -> Self {
        let token = token.into();
        self.security_token = (!token.is_empty()).then_some(token);
        self
    }

    /// The access key id (not secret).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The access key secret.
    pub fn access_key_secret(&self) -> &Secret {
        &self.access_key_secret
    }

    /// The security token, if these are temporary credentials.
    pub fn security_token(&self) -> Option<&Secret> {
        self.security_token.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_secret_and_token() {
        let c = Credentials::new("AKID", "very-secret").with_security_token("tok-123");
        let d = format!("{c:?}");
        assert!(d.contains("AKID"), "{d}");
        assert!(!d.contains("very-secret") && !d.contains("tok-123"), "{d}");
        assert_eq!(c.security_token().map(Secret::expose), Some("tok-123"));
        assert!(
            Credentials::new("a", "b")
                .with_security_token("")
                .security_token()
                .is_none()
        );
    }
}
