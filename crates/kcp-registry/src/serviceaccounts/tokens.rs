//! ServiceAccount tokens: JSON Web Tokens signed with the server's key, in the two forms
//! Kubernetes issues and accepts.
//!
//! - Bound tokens (TokenRequest, `kubectl create token`): issuer, audiences, `iat`/`nbf`/`exp`,
//!   a `jti`, and the private claim `kubernetes.io` naming the namespace, the service account
//!   (name and uid), an object the token is bound to (a Secret) and, as kcp adds it, the logical
//!   cluster (`clusterName`).
//! - Legacy tokens (Secrets of type `kubernetes.io/service-account-token`): issuer
//!   `kubernetes/serviceaccount`, no expiry, flat `kubernetes.io/serviceaccount/*` claims.
//!
//! Signing uses ECDSA P-256 (ES256) with a PKCS#8 key; the key id (`kid`) is, as Kubernetes
//! makes it, the unpadded base64url SHA-256 of the public key's DER `SubjectPublicKeyInfo`.
//! Verification accepts the signing key and any further public keys (`--service-account-key-file`).
//!
//! Owns: claims, signing and checking signatures and times. Must not know storage: whether the
//! service account (or secret) still exists is the caller's lookup ([`super`]).

use std::collections::HashSet;

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};

/// The issuer of legacy (Secret) tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// kcp's default `--service-account-issuer`.
pub const DEFAULT_ISSUER: &str = "https://kcp.default.svc";
/// Tokens are accepted this many seconds past `exp` and before `nbf`, as Kubernetes does.
const LEEWAY_SECONDS: u64 = 60;
/// The DER prefix of a P-256 public key's `SubjectPublicKeyInfo`, before the 65-byte point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// How the server issues and accepts tokens (kube-apiserver's `--service-account-*` flags).
pub struct TokenConfig {
    /// The signing key: a PKCS#8 PEM ECDSA P-256 private key.
    pub signing_key_pem: Vec<u8>,
    /// Further PEM public keys (EC or RSA) whose signatures are accepted.
    pub verifying_keys_pem: Vec<Vec<u8>>,
    /// Accepted issuers; the first is written into new tokens.
    pub issuers: Vec<String>,
    /// The audiences tokens must name one of (`--api-audiences`; the first issuer if empty).
    pub audiences: Vec<String>,
    /// The longest lifetime a TokenRequest gets, in seconds (none: unlimited).
    pub max_expiration_seconds: Option<i64>,
    /// The CA bundle token Secrets carry as `ca.crt` (the server's CA).
    pub root_ca_pem: Vec<u8>,
}

/// Makes a new signing key: a PKCS#8 PEM ECDSA P-256 private key.
pub fn generate_signing_key() -> Result<Vec<u8>, String> {
    let document =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map_err(|_| "no system randomness".to_string())?;
    let body = base64::engine::general_purpose::STANDARD.encode(document.as_ref());
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    Ok(pem.into_bytes())
}

/// The object a bound token is bound to (only Secrets here): deleting it ends the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundObject {
    pub name: String,
    pub uid: String,
}

/// The identity a token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSubject {
    /// The logical cluster of the service account.
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What a verified token says, for the caller to look up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub subject: TokenSubject,
    pub form: Form,
}

/// The two token forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Form {
    Bound {
        /// The token's id (`jti`), reported as the credential id.
        id: String,
        secret: Option<BoundObject>,
    },
    /// Valid while the named Secret holds exactly this token.
    Legacy { secret: String },
}

#[derive(Serialize, Deserialize)]
struct NamedRef {
    name: String,
    uid: String,
}

#[derive(Serialize, Deserialize)]
struct KubernetesClaims {
    #[serde(
        rename = "clusterName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    cluster_name: String,
    namespace: String,
    serviceaccount: NamedRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<BoundObject>,
}

#[derive(Serialize, Deserialize)]
struct BoundClaims {
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    iss: String,
    jti: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
    nbf: i64,
    sub: String,
}

#[derive(Serialize, Deserialize)]
struct LegacyClaims {
    iss: String,
    #[serde(rename = "kubernetes.io/serviceaccount/clusterName", default)]
    cluster_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    secret_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    uid: String,
    sub: String,
}

/// Only the issuer, read before the signature is checked to pick the form.
#[derive(Deserialize)]
struct Issuer {
    #[serde(default)]
    iss: String,
}

/// Tokens whose signature was checked, by SHA-256 digest, with their claims and expiry.
type Remembered = std::collections::HashMap<[u8; 32], (Verified, Option<i64>)>;

/// Verified tokens remembered at most; the memory starts over when full.
const MAX_REMEMBERED: usize = 10_000;

/// Issues and verifies service account tokens.
pub struct ServiceAccountTokens {
    /// The signing key's public point (uncompressed SEC1: `04 || x || y`).
    public_point: Vec<u8>,
    /// Signatures already checked: a token is verified once, not on every request (its
    /// times are still checked each time; the caller's lookups are not remembered).
    remembered: std::sync::Mutex<Remembered>,
    signing: EncodingKey,
    key_id: String,
    verifying: Vec<(DecodingKey, Algorithm)>,
    issuers: Vec<String>,
    audiences: Vec<String>,
    max_expiration_seconds: Option<i64>,
    root_ca_pem: Vec<u8>,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("key_id", &self.key_id)
            .field("issuers", &self.issuers)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountTokens {
    /// Reads the keys of `config`.
    pub fn new(config: TokenConfig) -> Result<ServiceAccountTokens, String> {
        let der = pem_body(&config.signing_key_pem, "PRIVATE KEY").ok_or(
            "the service account signing key must be a PEM \"PRIVATE KEY\" (PKCS#8) ECDSA P-256 key",
        )?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &SystemRandom::new())
                .map_err(|error| {
                    format!("the service account signing key is not a P-256 key: {error}")
                })?;
        let point = pair.public_key().as_ref().to_vec();
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&point);
        let key_id = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        let mut verifying = vec![(DecodingKey::from_ec_der(&point), Algorithm::ES256)];
        for pem in &config.verifying_keys_pem {
            let key = match DecodingKey::from_ec_pem(pem) {
                Ok(key) => (key, Algorithm::ES256),
                Err(_) => (
                    DecodingKey::from_rsa_pem(pem)
                        .map_err(|error| format!("a service account key file: {error}"))?,
                    Algorithm::RS256,
                ),
            };
            verifying.push(key);
        }
        let issuers = match config.issuers.is_empty() {
            true => vec![DEFAULT_ISSUER.to_string()],
            false => config.issuers,
        };
        let audiences = match config.audiences.is_empty() {
            true => vec![issuers[0].clone()],
            false => config.audiences,
        };
        Ok(ServiceAccountTokens {
            public_point: point.clone(),
            remembered: std::sync::Mutex::default(),
            signing: EncodingKey::from_ec_der(&der),
            key_id,
            verifying,
            issuers,
            audiences,
            max_expiration_seconds: config.max_expiration_seconds,
            root_ca_pem: config.root_ca_pem,
        })
    }

    /// The CA bundle token Secrets carry.
    pub fn root_ca_pem(&self) -> &[u8] {
        &self.root_ca_pem
    }

    /// The issuer written into new tokens.
    pub fn issuer(&self) -> &str {
        &self.issuers[0]
    }

    /// The OpenID Connect discovery document of the issuer, with `jwks_uri` for the keys, as
    /// kube-apiserver serves it at `/.well-known/openid-configuration`.
    pub fn openid_configuration(&self, jwks_uri: &str) -> serde_json::Value {
        serde_json::json!({
            "issuer": self.issuer(),
            "jwks_uri": jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }

    /// The signing key as a JSON Web Key Set, as kube-apiserver serves it at
    /// `/openid/v1/jwks`.
    pub fn jwks(&self) -> serde_json::Value {
        let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let (x, y) = self.public_point[1..].split_at(32);
        serde_json::json!({"keys": [{
            "use": "sig",
            "kty": "EC",
            "kid": self.key_id,
            "crv": "P-256",
            "alg": "ES256",
            "x": encode(x),
            "y": encode(y),
        }]})
    }

    /// The audiences a TokenRequest without any gets (`--api-audiences`).
    pub fn api_audiences(&self) -> &[String] {
        &self.audiences
    }

    /// The lifetime a TokenRequest asking for `requested` seconds gets.
    pub fn lifetime(&self, requested: i64) -> i64 {
        match self.max_expiration_seconds {
            Some(max) if requested > max => max,
            _ => requested,
        }
    }

    fn header(&self) -> Header {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.key_id.clone());
        header
    }

    /// A bound token for `subject`, valid for `audiences` from `now` (Unix seconds) for
    /// `lifetime` seconds.
    pub fn issue_bound(
        &self,
        subject: &TokenSubject,
        audiences: &[String],
        now: i64,
        lifetime: i64,
        secret: Option<BoundObject>,
    ) -> Result<String, String> {
        let claims = BoundClaims {
            aud: audiences.to_vec(),
            exp: now + lifetime,
            iat: now,
            iss: self.issuers[0].clone(),
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                cluster_name: subject.cluster.clone(),
                namespace: subject.namespace.clone(),
                serviceaccount: NamedRef {
                    name: subject.name.clone(),
                    uid: subject.uid.clone(),
                },
                secret,
            },
            nbf: now,
            sub: service_account_user(&subject.namespace, &subject.name),
        };
        jsonwebtoken::encode(&self.header(), &claims, &self.signing).map_err(|e| e.to_string())
    }

    /// A legacy token for `subject`, kept in the Secret `secret`.
    pub fn issue_legacy(&self, subject: &TokenSubject, secret: &str) -> Result<String, String> {
        let claims = LegacyClaims {
            iss: LEGACY_ISSUER.into(),
            cluster_name: subject.cluster.clone(),
            namespace: subject.namespace.clone(),
            secret_name: secret.into(),
            name: subject.name.clone(),
            uid: subject.uid.clone(),
            sub: service_account_user(&subject.namespace, &subject.name),
        };
        jsonwebtoken::encode(&self.header(), &claims, &self.signing).map_err(|e| e.to_string())
    }

    /// What `token` says, if it is a service account token this server accepts: signed by one
    /// of its keys, from an accepted issuer, for an accepted audience, within its times.
    pub fn verify(&self, token: &str) -> Option<Verified> {
        if token.matches('.').count() != 2 {
            return None;
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(digest.as_ref());
        let now = jsonwebtoken::get_current_timestamp() as i64;
        if let Some((verified, expires)) = self.remembered.lock().unwrap().get(&key) {
            if expires.is_none_or(|at| now <= at + LEEWAY_SECONDS as i64) {
                return Some(verified.clone());
            }
            return None;
        }
        let (verified, expires) = self.verify_signed(token)?;
        let mut remembered = self.remembered.lock().unwrap();
        if remembered.len() >= MAX_REMEMBERED {
            remembered.clear();
        }
        remembered.insert(key, (verified.clone(), expires));
        Some(verified)
    }

    /// What `token` says and when it expires, its signature, issuer, audience and times
    /// checked.
    fn verify_signed(&self, token: &str) -> Option<(Verified, Option<i64>)> {
        let payload = token.split('.').nth(1)?;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()?;
        let issuer: Issuer = serde_json::from_slice(&payload).ok()?;
        if issuer.iss == LEGACY_ISSUER {
            let claims: LegacyClaims = self.check(token, |validation| {
                validation.required_spec_claims = HashSet::new();
                validation.validate_exp = false;
                validation.validate_aud = false;
            })?;
            let verified = Verified {
                subject: TokenSubject {
                    cluster: claims.cluster_name,
                    namespace: claims.namespace,
                    name: claims.name,
                    uid: claims.uid,
                },
                form: Form::Legacy {
                    secret: claims.secret_name,
                },
            };
            return Some((verified, None));
        }
        if !self.issuers.contains(&issuer.iss) {
            return None;
        }
        let claims: BoundClaims = self.check(token, |validation| {
            validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
            validation.set_issuer(&self.issuers);
            validation.set_audience(&self.audiences);
            validation.validate_nbf = true;
        })?;
        let verified = Verified {
            subject: TokenSubject {
                cluster: claims.kubernetes.cluster_name,
                namespace: claims.kubernetes.namespace,
                name: claims.kubernetes.serviceaccount.name,
                uid: claims.kubernetes.serviceaccount.uid,
            },
            form: Form::Bound {
                id: claims.jti,
                secret: claims.kubernetes.secret,
            },
        };
        Some((verified, Some(claims.exp)))
    }

    /// The claims of `token` under the first key whose signature matches.
    fn check<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        configure: impl Fn(&mut Validation),
    ) -> Option<T> {
        self.verifying.iter().find_map(|(key, algorithm)| {
            let mut validation = Validation::new(*algorithm);
            validation.leeway = LEEWAY_SECONDS;
            configure(&mut validation);
            jsonwebtoken::decode::<T>(token, key, &validation)
                .ok()
                .map(|data| data.claims)
        })
    }
}

/// The user name of a service account.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The DER body of the first PEM block labelled `label`.
fn pem_body(pem: &[u8], label: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let body: String = text[start..stop].split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> ServiceAccountTokens {
        ServiceAccountTokens::new(TokenConfig {
            signing_key_pem: generate_signing_key().unwrap(),
            verifying_keys_pem: Vec::new(),
            issuers: Vec::new(),
            audiences: Vec::new(),
            max_expiration_seconds: Some(7200),
            root_ca_pem: Vec::new(),
        })
        .unwrap()
    }

    fn subject() -> TokenSubject {
        TokenSubject {
            cluster: "c1".into(),
            namespace: "team".into(),
            name: "robot".into(),
            uid: "u-1".into(),
        }
    }

    fn now() -> i64 {
        jsonwebtoken::get_current_timestamp() as i64
    }

    fn claims(token: &str) -> serde_json::Value {
        let payload = token.split('.').nth(1).unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn bound_tokens_carry_kubernetes_claims_and_verify() {
        let tokens = tokens();
        let audiences = tokens.api_audiences().to_vec();
        assert_eq!(audiences, [DEFAULT_ISSUER]);
        let token = tokens
            .issue_bound(&subject(), &audiences, now(), 3600, None)
            .unwrap();
        let claims = claims(&token);
        assert_eq!(claims["iss"], DEFAULT_ISSUER);
        assert_eq!(claims["sub"], "system:serviceaccount:team:robot");
        assert_eq!(claims["kubernetes.io"]["serviceaccount"]["uid"], "u-1");
        assert_eq!(claims["kubernetes.io"]["clusterName"], "c1");
        assert_eq!(
            claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
            3600
        );
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.alg, Algorithm::ES256);
        assert_eq!(header.kid.as_deref(), Some(tokens.key_id.as_str()));
        let verified = tokens.verify(&token).unwrap();
        assert_eq!(verified.subject, subject());
        assert!(matches!(verified.form, Form::Bound { secret: None, .. }));
    }

    #[test]
    fn expired_foreign_audience_and_tampered_tokens_are_refused() {
        let tokens = tokens();
        let audiences = tokens.api_audiences().to_vec();
        let expired = tokens
            .issue_bound(&subject(), &audiences, now() - 7200, 600, None)
            .unwrap();
        assert_eq!(tokens.verify(&expired), None);
        let elsewhere = tokens
            .issue_bound(&subject(), &["vault".to_string()], now(), 600, None)
            .unwrap();
        assert_eq!(tokens.verify(&elsewhere), None);
        let good = tokens
            .issue_bound(&subject(), &audiences, now(), 600, None)
            .unwrap();
        let mut parts: Vec<&str> = good.split('.').collect();
        let forged_claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(claims(&good).to_string().replace("robot", "admin"));
        parts[1] = &forged_claims;
        assert_eq!(tokens.verify(&parts.join(".")), None);
        // Another server's key signs nothing here.
        let other = super::tests::tokens();
        let theirs = other
            .issue_bound(&subject(), &audiences, now(), 600, None)
            .unwrap();
        assert_eq!(tokens.verify(&theirs), None);
        assert_eq!(tokens.verify("not-a-jwt"), None);
        assert_eq!(tokens.verify("a.b.c"), None);
    }

    #[test]
    fn legacy_tokens_name_their_secret_and_never_expire() {
        let tokens = tokens();
        let token = tokens.issue_legacy(&subject(), "robot-token").unwrap();
        let claims = claims(&token);
        assert_eq!(claims["iss"], LEGACY_ISSUER);
        assert_eq!(
            claims["kubernetes.io/serviceaccount/secret.name"],
            "robot-token"
        );
        assert!(claims.get("exp").is_none());
        let verified = tokens.verify(&token).unwrap();
        assert_eq!(verified.subject, subject());
        assert_eq!(
            verified.form,
            Form::Legacy {
                secret: "robot-token".into()
            }
        );
    }

    #[test]
    fn a_token_is_verified_once_and_its_expiry_still_holds() {
        let tokens = tokens();
        let audiences = tokens.api_audiences().to_vec();
        let token = tokens
            .issue_bound(&subject(), &audiences, now(), 600, None)
            .unwrap();
        let first = tokens.verify(&token).unwrap();
        assert_eq!(tokens.remembered.lock().unwrap().len(), 1);
        assert_eq!(tokens.verify(&token), Some(first));
        // Remembered, but past its expiry (and the leeway): refused.
        for (_, expires) in tokens.remembered.lock().unwrap().values_mut() {
            *expires = Some(now() - 2 * LEEWAY_SECONDS as i64);
        }
        assert_eq!(tokens.verify(&token), None);
    }

    #[test]
    fn the_jwks_key_verifies_tokens() {
        let tokens = tokens();
        let jwks = tokens.jwks();
        let key = &jwks["keys"][0];
        assert_eq!(key["kid"], tokens.key_id.as_str());
        let decoding =
            DecodingKey::from_ec_components(key["x"].as_str().unwrap(), key["y"].as_str().unwrap())
                .unwrap();
        let token = tokens
            .issue_bound(&subject(), tokens.api_audiences(), now(), 600, None)
            .unwrap();
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(tokens.api_audiences());
        assert!(jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &validation).is_ok());
        let discovery = tokens.openid_configuration("https://example.com/openid/v1/jwks");
        assert_eq!(discovery["issuer"], DEFAULT_ISSUER);
        assert_eq!(discovery["jwks_uri"], "https://example.com/openid/v1/jwks");
    }

    #[test]
    fn lifetimes_are_capped_by_the_maximum() {
        let tokens = tokens();
        assert_eq!(tokens.lifetime(3600), 3600);
        assert_eq!(tokens.lifetime(86400), 7200);
    }

    #[test]
    fn a_key_that_is_not_pkcs8_p256_is_refused() {
        let config = TokenConfig {
            signing_key_pem:
                b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n".to_vec(),
            verifying_keys_pem: Vec::new(),
            issuers: Vec::new(),
            audiences: Vec::new(),
            max_expiration_seconds: None,
            root_ca_pem: Vec::new(),
        };
        assert!(ServiceAccountTokens::new(config).is_err());
    }
}
